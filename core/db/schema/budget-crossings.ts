import { index, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

/**
 * A spend limit's `alert_at` fraction crossed (spec 2.6): recorded once per scope, window and
 * fraction, when the settled spend first reaches it. The alert producers send them.
 */
export const budgetCrossings = pgTable(
  'budget_crossings',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    /** `project:<id>`, `member:<id>` or `organization:<id>`. */
    scope: text('scope').notNull(),
    /** The budget window's start, `YYYY-MM-DD`. */
    window: text('window').notNull(),
    fraction: numeric('fraction', { mode: 'number' }).notNull(),
    limit: numeric('limit', { mode: 'number' }).notNull(),
    spent: numeric('spent', { mode: 'number' }).notNull(),
    behavior: text('behavior', { enum: ['alert', 'block'] }).notNull(),
    crossedAt: timestamp('crossed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('budget_crossings_once').on(t.orgId, t.scope, t.window, t.fraction), index('budget_crossings_org').on(t.orgId, t.crossedAt)],
);
