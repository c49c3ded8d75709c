import { sql } from 'drizzle-orm';
import { index, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';

/**
 * Who spend is charged to (spec 2.6 cost centers, issue 23). `code` is what finance systems key
 * on: unique in the organization whatever its case. Deleting archives: an archived center keeps
 * its history and receives no new allocations.
 */
export const costCenters = pgTable(
  'cost_centers',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    code: text('code').notNull(),
    ownerEmail: text('owner_email'),
    archivedAt: timestamp('archived_at', { withTimezone: true }),
    ...resourceColumns(),
  },
  (t) => [
    uniqueIndex('cost_centers_org_code').on(t.orgId, sql`lower(${t.code})`),
    index('cost_centers_org_created').on(t.orgId, t.createdAt, t.id),
  ],
);

export type CostCenterRow = typeof costCenters.$inferSelect;

/**
 * A provider commitment (spec 2.6, issue 23): an amount prepaid or committed to one provider
 * kind over a period, at an optional discount, counting the models named (all of the kind when
 * none). Reads add what has been consumed of it and where it is heading.
 */
export const commitments = pgTable(
  'commitments',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    providerKind: text('provider_kind').notNull(),
    label: text('label').notNull(),
    amountUsd: numeric('amount_usd', { mode: 'number' }).notNull(),
    periodStart: timestamp('period_start', { withTimezone: true }).notNull(),
    periodEnd: timestamp('period_end', { withTimezone: true }).notNull(),
    discountPct: numeric('discount_pct', { mode: 'number' }),
    models: text('models').array(),
    notes: text('notes'),
    ...resourceColumns(),
  },
  (t) => [index('commitments_org_created').on(t.orgId, t.createdAt, t.id)],
);

export type CommitmentRow = typeof commitments.$inferSelect;
