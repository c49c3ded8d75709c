import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Where a scheduled walk (a detector over organizations, the MCP sync over servers) stands: the
 * last id it is done with. A run that times out mid-walk leaves it, and the schedule's next run
 * goes on from there instead of from the start (issue 55); a walk that reaches its end clears it.
 */
export const walkCursors = pgTable('walk_cursors', {
  /** `<task queue>:<walk>`, e.g. `gw-maintenance:findings:spend-anomaly`. */
  walk: text('walk').primaryKey(),
  afterId: text('after_id').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});
