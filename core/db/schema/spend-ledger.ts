import { index, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

export const SPEND_STATES = ['reserved', 'settled', 'released'] as const;

/**
 * Spend held against budgets by work that outlasts a request: a job's estimated cost is
 * reserved when it is submitted, settled at its actual cost on success, released on failure
 * or cancel. Keyed by the key lineage, so a rotated key keeps its spend.
 */
export const spendLedger = pgTable(
  'spend_ledger',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    lineageId: text('lineage_id').notNull(),
    projectId: text('project_id').notNull(),
    jobId: text('job_id'),
    amount: numeric('amount', { mode: 'number' }).notNull(),
    state: text('state', { enum: SPEND_STATES }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('spend_ledger_lineage').on(t.lineageId, t.createdAt), uniqueIndex('spend_ledger_job').on(t.jobId)],
);
