import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, numeric, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import type { CostShareRecord } from './cost-attribution';
import type { GuardrailOutcome } from './guardrail-policy';
import { organizations } from './organizations';

export type RequestAttempt = {
  connection_id: string;
  provider: string;
  model: string;
  position: string;
  outcome: 'ok' | string;
  status: number | null;
  latency_ms: number;
};

/**
 * One row per gateway request (spec 4.1 "request log"), written in batches off the hot path.
 * Prompts and answers are stored only when the organization turned prompt logging on and the
 * request did not say `logging: false`, and are set to NULL after the organization's
 * `prompt_logging_retention_days` by the retention schedule (activities/request-log-retention.ts).
 *
 * Partitioned by RANGE (created_at), one partition a UTC day (migration 0015; drizzle does not
 * model partitioning): the primary key must hold the partition key, hence (id, created_at). The
 * indexes serve the request-log filters, each within one organization and newest first; route,
 * provider and tag filters ride the (org, created_at, id) index. The indexes are ascending on
 * purpose: a B-tree read backwards answers `ORDER BY created_at DESC, id DESC` (NULLS FIRST, the
 * default), which a `DESC NULLS LAST` index (what drizzle writes for `.desc()`) would not.
 */
export const requestLogs = pgTable(
  'request_logs',
  {
    id: text('id').notNull(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    keyId: text('key_id').notNull(),
    projectId: text('project_id').notNull(),
    endpoint: text('endpoint').notNull(),
    requestedModel: text('requested_model'),
    routeSlug: text('route_slug'),
    servedModel: text('served_model'),
    provider: text('provider'),
    connectionId: text('connection_id'),
    chainPosition: text('chain_position'),
    status: integer('status').notNull(),
    errorType: text('error_type'),
    errorCode: text('error_code'),
    stream: boolean('stream').notNull().default(false),
    latencyMs: integer('latency_ms').notNull(),
    attempts: jsonb('attempts').$type<RequestAttempt[]>().notNull().default([]),
    usage: jsonb('usage').$type<Record<string, unknown> | null>(),
    cost: numeric('cost', { mode: 'number' }),
    priceSource: text('price_source'),
    userId: text('user_id'),
    sessionId: text('session_id'),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    paramsDropped: text('params_dropped').array().notNull().default([]),
    /** `hit`, `miss`, `bypass`, `uncacheable`; null when the cache was off for the request. */
    cacheStatus: text('cache_status'),
    /** On a hit, the request whose answer was served. */
    cacheSourceRequestId: text('cache_source_request_id'),
    guardrails: jsonb('guardrails').$type<GuardrailOutcome | null>(),
    /** `endpoint: decisions`: the decision (`dec_...`) this model call answered (issue 24). */
    decisionId: text('decision_id'),
    /** A batch item (issue 56): the batch (`batch_...`, `msgbatch_...`) that ran it. */
    batchId: text('batch_id'),
    /** The cost-center rule lineage and version that allocated the request; null when none matched. */
    costRuleId: text('cost_rule_id'),
    costRuleVersionId: text('cost_rule_version_id'),
    /** The split (issue 23); null when no rule matched: all of it unallocated. */
    costAllocation: jsonb('cost_allocation').$type<CostShareRecord[] | null>(),
    /** The W3C trace the request ran in (its server span's, or the caller's `traceparent`'s); null when neither. */
    traceId: text('trace_id'),
    requestBody: jsonb('request_body'),
    responseBody: jsonb('response_body'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'request_logs_pk', columns: [t.id, t.createdAt] }),
    index('request_logs_org_created').on(t.orgId, t.createdAt, t.id),
    index('request_logs_org_key').on(t.orgId, t.keyId, t.createdAt),
    index('request_logs_org_user').on(t.orgId, t.userId, t.createdAt).where(sql`${t.userId} is not null`),
    index('request_logs_org_session').on(t.orgId, t.sessionId, t.createdAt).where(sql`${t.sessionId} is not null`),
    index('request_logs_org_model').on(t.orgId, t.requestedModel, t.createdAt),
    index('request_logs_org_status').on(t.orgId, t.status, t.createdAt),
    /** A trace id finds its requests (the filter `trace_id`). */
    index('request_logs_org_trace').on(t.orgId, t.traceId).where(sql`${t.traceId} is not null`),
    /** A project's purge check counts its requests. */
    index('request_logs_project').on(t.projectId),
    /** Only rows still holding a body: what the retention schedule looks for, oldest first. */
    index('request_logs_bodies').on(t.orgId, t.createdAt).where(sql`${t.requestBody} is not null or ${t.responseBody} is not null`),
  ],
);
