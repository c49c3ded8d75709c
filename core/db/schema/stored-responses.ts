import { bigint, index, integer, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

/**
 * OpenAI Responses kept with `store: true` (issue 35), for `previous_response_id` and
 * `GET /v1/responses/{id}`: one row a turn (issue 52), holding that turn's own input items and
 * the response object, and naming the turn it continued, so a conversation is kept once however
 * long it grows and a read of one response loads that response only. What is kept is what the
 * request log keeps: guardrail matches redacted. Read only within the organization's prompt
 * retention (`prompt_logging_retention_days`, counted from `created_at` at read time, so a
 * shortened window applies at once) and only by keys the request log's body rule lets read it;
 * the retention run deletes what has expired (core/responses/stored-responses.ts).
 */
export const storedResponses = pgTable(
  'stored_responses',
  {
    /** `resp_<request id>`. */
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    /** The key that made it, and its lineage (a rotated key keeps its conversations). */
    keyId: text('key_id').notNull(),
    lineageId: text('lineage_id').notNull(),
    /**
     * The turn this one continued (its `previous_response_id`); null for a conversation's first.
     * No foreign key: an earlier turn deleted or expired leaves this one readable, though no
     * longer continuable.
     */
    previousId: text('previous_id'),
    /** Turns in the conversation through this one: 1 for its first. */
    depth: integer('depth').notNull(),
    /** Stored bytes of the conversation through this turn (this turn's input and response, and every earlier turn's). */
    conversationBytes: bigint('conversation_bytes', { mode: 'number' }).notNull(),
    /**
     * This turn's own input items, as the request log keeps them. Rows kept before issue 52 hold
     * every earlier turn expanded here instead, as a first turn (depth 1) would.
     */
    input: jsonb('input').$type<Array<Record<string, unknown>>>().notNull(),
    /** The response object as the client received it, with what the request log would not keep redacted. */
    response: jsonb('response').$type<Record<string, unknown>>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  // The retention run walks each organization's oldest first.
  (t) => [index('stored_responses_org_created').on(t.orgId, t.createdAt)],
);
