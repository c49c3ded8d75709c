import { bigint, integer, jsonb, numeric, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

/**
 * Usage by hour (issue 13): what `/v1/usage` and `/manage/v1/usage` read instead of scanning raw
 * request-log rows. One row per organization, hour and attribution (key, project, model as the
 * client named it, provider, end user, tag set); absent attributions are '' so they take part in
 * the key. Kept up to date as request-log rows are written.
 */
function rollupDimensions() {
  return {
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    hour: timestamp('hour', { withTimezone: true }).notNull(),
    keyId: text('key_id').notNull(),
    projectId: text('project_id').notNull(),
    model: text('model').notNull().default(''),
    provider: text('provider').notNull().default(''),
    userId: text('user_id').notNull().default(''),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
  };
}

function rollupCounters() {
  return {
    requests: integer('requests').notNull().default(0),
    promptTokens: bigint('prompt_tokens', { mode: 'number' }).notNull().default(0),
    completionTokens: bigint('completion_tokens', { mode: 'number' }).notNull().default(0),
    totalTokens: bigint('total_tokens', { mode: 'number' }).notNull().default(0),
    /** Estimated cost in US dollars of the priced requests. */
    cost: numeric('cost', { mode: 'number' }).notNull().default(0),
    /** Requests whose cost could not be estimated. */
    unpricedRequests: integer('unpriced_requests').notNull().default(0),
  };
}

export const usageHourly = pgTable(
  'usage_hourly',
  { ...rollupDimensions(), ...rollupCounters() },
  (t) => [primaryKey({ name: 'usage_hourly_pk', columns: [t.orgId, t.hour, t.keyId, t.projectId, t.model, t.provider, t.userId, t.tags] })],
);

/**
 * The same rollup split by cost center (issue 23), for `group_by=cost_center`: a request counts
 * in every center it was charged to (requests and tokens whole), and `cost` is that center's
 * part, so the costs of a bucket's centers, '' (unallocated) among them, add up to its total.
 */
export const usageHourlyCostCenters = pgTable(
  'usage_hourly_cost_centers',
  { ...rollupDimensions(), costCenterId: text('cost_center_id').notNull().default(''), ...rollupCounters() },
  (t) => [primaryKey({ name: 'usage_hourly_cost_centers_pk', columns: [t.orgId, t.hour, t.keyId, t.projectId, t.model, t.provider, t.userId, t.tags, t.costCenterId] })],
);
