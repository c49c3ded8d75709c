import { index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

/**
 * OpenAI Responses kept with `store: true` (issue 35), for `previous_response_id` and
 * `GET /v1/responses/{id}`: what the model was given (the earlier turns expanded, this turn's
 * input) and the response object as answered. Read only within the organization's prompt
 * retention (`prompt_logging_retention_days`, counted from `created_at` at read time, so a
 * shortened window applies at once) and only by keys whose reach covers `lineage_id`; the
 * retention run deletes what has expired (core/responses/stored-responses.ts).
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
    /** The input items the model was given, earlier turns first (a continuation prepends these and `response.output`). */
    input: jsonb('input').$type<Array<Record<string, unknown>>>().notNull(),
    /** The response object as the client received it. */
    response: jsonb('response').$type<Record<string, unknown>>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  // The retention run walks each organization's oldest first.
  (t) => [index('stored_responses_org_created').on(t.orgId, t.createdAt)],
);
