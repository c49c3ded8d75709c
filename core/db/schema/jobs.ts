import { sql } from 'drizzle-orm';
import { index, integer, jsonb, pgTable, real, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import type { CostShareRecord } from './cost-attribution';
import { organizations } from './organizations';

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const TERMINAL_JOB_STATUSES: readonly JobStatus[] = ['succeeded', 'failed', 'canceled'];

export type JobOutputRecord = { storage_key: string; duration_seconds: number; resolution: string; aspect_ratio: string; mime_type: string; bytes: number };
export type JobUsage = { seconds: number; cost: number | null; price_source?: string };
export type JobError = { message: string; type: string; code: string | null };
export type JobWebhook = { url: string; events: string[] };

/**
 * The read model of asynchronous jobs (spec 2.1). The `videoJob` workflow owns the lifecycle;
 * its activities write each transition here, and list and read endpoints page through it.
 */
export const jobs = pgTable(
  'jobs',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    keyId: text('key_id').notNull(),
    lineageId: text('lineage_id').notNull(),
    projectId: text('project_id').notNull(),
    type: text('type').notNull(),
    status: text('status', { enum: JOB_STATUSES }).notNull().default('queued'),
    /** Requested model until a provider accepts; then the target model that runs. */
    model: text('model').notNull(),
    routeSlug: text('route_slug'),
    route: text('route'),
    provider: text('provider'),
    connectionId: text('connection_id'),
    providerJobId: text('provider_job_id'),
    progress: real('progress').notNull().default(0),
    request: jsonb('request').$type<Record<string, unknown>>().notNull(),
    webhook: jsonb('webhook').$type<JobWebhook | null>(),
    output: jsonb('output').$type<JobOutputRecord | null>(),
    usage: jsonb('usage').$type<JobUsage | null>(),
    error: jsonb('error').$type<JobError | null>(),
    /** The cost-center rule in force when the job was accepted, and its split, recorded as the job ends (issue 23). */
    costRuleId: text('cost_rule_id'),
    costRuleVersionId: text('cost_rule_version_id'),
    costAllocation: jsonb('cost_allocation').$type<CostShareRecord[] | null>(),
    statusChecks: integer('status_checks').notNull().default(0),
    /**
     * The Idempotency-Key of a submit sent and not yet answered (issue 55): written before the
     * send, cleared by the answer (a refusal) or by the move to `running`. A submit attempt that
     * finds it set cannot know whether the provider took the render.
     */
    submitIntent: text('submit_intent'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    startedAt: timestamp('started_at', { withTimezone: true }),
    completedAt: timestamp('completed_at', { withTimezone: true }),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('jobs_org_id').on(t.orgId, t.id),
    index('jobs_lineage_id').on(t.lineageId, t.id),
    index('jobs_project_id').on(t.projectId, t.id),
    // The retention schedule's walk over outputs past their expiry (core/jobs/expired-outputs.ts).
    index('jobs_expires_at').on(t.expiresAt, t.id).where(sql`${t.expiresAt} IS NOT NULL`),
    // The sweep's look at jobs not yet ended and not changed for a while (activities/job-sweep.ts).
    index('jobs_unfinished_updated_at').on(t.updatedAt).where(sql`${t.status} in ('queued', 'running')`),
  ],
);

/**
 * One event per terminal transition (spec 6.1), with the job as a read returned it then. The
 * webhook deliveries start from these rows.
 */
export const jobEvents = pgTable(
  'job_events',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    jobId: text('job_id').notNull().references(() => jobs.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  // A job has one terminal transition, so one event: a retried activity cannot record two.
  (t) => [uniqueIndex('job_events_job').on(t.jobId)],
);
