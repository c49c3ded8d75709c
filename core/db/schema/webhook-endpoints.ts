import { index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';

export const JOB_EVENT_TYPES = ['job.succeeded', 'job.failed', 'job.canceled'] as const;
export type JobEventType = (typeof JOB_EVENT_TYPES)[number];
/**
 * A batch's ending (issue 56, an extension): an endpoint receives these only when it names
 * them; created without `events`, it takes the spec's three job events.
 */
export const BATCH_EVENT_TYPES = ['batch.completed', 'batch.failed', 'batch.expired', 'batch.cancelled'] as const;
/** Every event type an endpoint may subscribe to. */
export const ENDPOINT_EVENT_TYPES = [...JOB_EVENT_TYPES, ...BATCH_EVENT_TYPES] as const;

/** A signing secret that was rotated out but keeps signing until `expires_at`. */
export type RetiredSecret = { sealed: string; expires_at: string };

/**
 * A console webhook endpoint. Its signing secret must be usable to sign, so it is sealed, not
 * hashed; retired secrets keep signing for 24 hours after a rotation (spec 6.3).
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    description: text('description'),
    events: text('events').array().notNull(),
    secretSealed: text('secret_sealed').notNull(),
    retiredSecrets: jsonb('retired_secrets').$type<RetiredSecret[]>().notNull().default([]),
    secretRotatedAt: timestamp('secret_rotated_at', { withTimezone: true }),
    deletedAt: timestamp('deleted_at', { withTimezone: true }),
    ...resourceColumns(),
  },
  (t) => [index('webhook_endpoints_org').on(t.orgId)],
);
