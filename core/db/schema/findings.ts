import { sql } from 'drizzle-orm';
import { doublePrecision, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';
import type { AlertEventType, AlertSeverity } from './webhook-deliveries';

export const FINDING_STATUSES = ['open', 'acknowledged', 'resolved'] as const;
export type FindingStatus = (typeof FINDING_STATUSES)[number];
export const FINDING_SCOPE_KINDS = ['organization', 'project', 'member', 'key', 'connection', 'model', 'mcp_server', 'commitment', 'end_user'] as const;
export type FindingScopeKind = (typeof FINDING_SCOPE_KINDS)[number];

/** What a finding is about beyond its scope (spec 4.4): the model, connection or route, where one applies; for a budget crossing, which budget, window and fraction. */
export type FindingSubject = { model?: string; connection?: string; route?: string; tool?: string; budget?: string };

/**
 * Findings (spec 4.4, 6.2): what the detectors saw, one row per fingerprint (type, scope,
 * subject) while it is not resolved; a later detection after it resolved opens a new row.
 * `acknowledged` is still live: a detection keeps updating it.
 */
export const findings = pgTable(
  'findings',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    type: text('type').$type<AlertEventType>().notNull(),
    severity: text('severity').$type<AlertSeverity>().notNull(),
    status: text('status', { enum: FINDING_STATUSES }).notNull().default('open'),
    fingerprint: text('fingerprint').notNull(),
    title: text('title').notNull(),
    summary: text('summary').notNull(),
    scopeKind: text('scope_kind', { enum: FINDING_SCOPE_KINDS }).notNull(),
    scopeId: text('scope_id').notNull(),
    /** The project it is about (a project's or a key's finding), for project-restricted tokens; null: organization-wide. */
    projectId: text('project_id'),
    subject: jsonb('subject').$type<FindingSubject>().notNull().default({}),
    windowFrom: timestamp('window_from', { withTimezone: true }).notNull(),
    windowTo: timestamp('window_to', { withTimezone: true }).notNull(),
    observed: doublePrecision('observed'),
    expected: doublePrecision('expected'),
    threshold: doublePrecision('threshold'),
    evidence: jsonb('evidence').$type<Record<string, unknown>>().notNull().default({}),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull(),
    resolvedAt: timestamp('resolved_at', { withTimezone: true }),
    /** When its notifications were last queued: a fingerprint that flaps notifies at most once an hour. */
    notifiedAt: timestamp('notified_at', { withTimezone: true }),
    acknowledgedAt: timestamp('acknowledged_at', { withTimezone: true }),
    /** The management token that acknowledged it. */
    acknowledgedBy: text('acknowledged_by'),
    occurrences: integer('occurrences').notNull().default(1),
    ...resourceColumns(),
  },
  (t) => [
    // One live finding per fingerprint: a detection updates it instead of opening another.
    uniqueIndex('findings_live_fingerprint').on(t.orgId, t.fingerprint).where(sql`${t.status} <> 'resolved'`),
    /** A reopened finding looks up when its fingerprint was last notified. */
    index('findings_notified').on(t.orgId, t.fingerprint, t.notifiedAt),
    index('findings_org_created').on(t.orgId, t.createdAt, t.id),
    index('findings_org_project').on(t.orgId, t.projectId),
  ],
);

export type FindingRow = typeof findings.$inferSelect;

/**
 * The effective price (catalogue or custom rate) each organization's served models had when the
 * cost-drift detector last looked, per million tokens: a change since is a `cost.drift` finding.
 */
export const priceSnapshots = pgTable(
  'price_snapshots',
  {
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    provider: text('provider').notNull(),
    model: text('model').notNull(),
    inputPerMillion: doublePrecision('input_per_million'),
    outputPerMillion: doublePrecision('output_per_million'),
    seenAt: timestamp('seen_at', { withTimezone: true }).notNull(),
  },
  (t) => [primaryKey({ name: 'price_snapshots_pk', columns: [t.orgId, t.provider, t.model] })],
);
