import { bigint, integer, jsonb, numeric, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

/**
 * Usage by hour (issue 13): what `/v1/usage` and `/manage/v1/usage` read instead of scanning raw
 * request-log rows. One row per organization, hour and attribution (key, project, model as the
 * client named it, provider, end user, tag set); absent attributions are '' so they take part in
 * the key. Kept up to date as request-log rows are written.
 */
export const usageHourly = pgTable(
  'usage_hourly',
  {
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    hour: timestamp('hour', { withTimezone: true }).notNull(),
    keyId: text('key_id').notNull(),
    projectId: text('project_id').notNull(),
    model: text('model').notNull().default(''),
    provider: text('provider').notNull().default(''),
    userId: text('user_id').notNull().default(''),
    tags: jsonb('tags').$type<Record<string, string>>().notNull().default({}),
    requests: integer('requests').notNull().default(0),
    promptTokens: bigint('prompt_tokens', { mode: 'number' }).notNull().default(0),
    completionTokens: bigint('completion_tokens', { mode: 'number' }).notNull().default(0),
    totalTokens: bigint('total_tokens', { mode: 'number' }).notNull().default(0),
    /** Estimated cost in US dollars of the priced requests. */
    cost: numeric('cost', { mode: 'number' }).notNull().default(0),
    /** Requests whose cost could not be estimated. */
    unpricedRequests: integer('unpriced_requests').notNull().default(0),
  },
  (t) => [primaryKey({ name: 'usage_hourly_pk', columns: [t.orgId, t.hour, t.keyId, t.projectId, t.model, t.provider, t.userId, t.tags] })],
);
