import { integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * The one idempotency mechanism (management POSTs and POST /v1/videos): the first answer to a
 * key, scoped to the organization and the operation, replayed while `expires_at` is ahead.
 */
export const idempotencyRecords = pgTable(
  'idempotency_records',
  {
    orgId: text('org_id').notNull(),
    scope: text('scope').notNull(),
    key: text('key').notNull(),
    requestHash: text('request_hash').notNull(),
    /** `failed`: the request failed after its checkpoint; a retry resolves to that reference. */
    state: text('state', { enum: ['in_progress', 'done', 'failed'] }).notNull(),
    responseStatus: integer('response_status'),
    responseBody: jsonb('response_body'),
    /**
     * Fencing token of the request that holds the key now; a request whose lease passed and whose
     * record another took over finds another token here, so its writes match no row.
     */
    claimToken: text('claim_token'),
    /**
     * What the request may have started, written before it starts it (`{ job_id, ... }`): a
     * retry of a failed or crashed request resolves to it instead of starting it again.
     */
    checkpoint: jsonb('checkpoint'),
    /** A request that crashed mid-way stops blocking its key once this passes. */
    lockedUntil: timestamp('locked_until', { withTimezone: true }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.scope, t.key] })],
);
