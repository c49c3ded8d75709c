import { sql } from 'drizzle-orm';
import { boolean, integer, numeric, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';
import { projects } from './projects';

export const END_USER_CAP_PERIODS = ['daily', 'weekly', 'monthly'] as const;
export type EndUserCapPeriod = (typeof END_USER_CAP_PERIODS)[number];
export const END_USER_CAP_BEHAVIORS = ['block', 'alert'] as const;
export type EndUserCapBehavior = (typeof END_USER_CAP_BEHAVIORS)[number];
export const END_USER_MISSING_ID = ['serve', 'refuse'] as const;
export type EndUserMissingId = (typeof END_USER_MISSING_ID)[number];

/**
 * Caps on what one end customer (`metadata.user_id`) may spend per period (spec 2.6). One rule
 * per organization (`project_id` null) and one per project. Amounts are `numeric` and travel as
 * decimal strings, so a cap is exact to the nano-dollar.
 */
export const endUserCapRules = pgTable(
  'end_user_cap_rules',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    projectId: text('project_id').references(() => projects.id, { onDelete: 'cascade' }),
    /** Dollars per period for a customer without an override; null: no default cap. */
    amount: numeric('amount'),
    period: text('period', { enum: END_USER_CAP_PERIODS }).notNull(),
    behavior: text('behavior', { enum: END_USER_CAP_BEHAVIORS }).notNull(),
    missingId: text('missing_id', { enum: END_USER_MISSING_ID }).notNull(),
    enabled: boolean('enabled').notNull().default(true),
    ...resourceColumns(),
  },
  (t) => [
    uniqueIndex('end_user_cap_rules_org_wide').on(t.orgId).where(sql`${t.projectId} is null`),
    uniqueIndex('end_user_cap_rules_project').on(t.projectId).where(sql`${t.projectId} is not null`),
  ],
);

/** One customer's own amount under a rule, replacing the rule's default amount. */
export const endUserCapOverrides = pgTable(
  'end_user_cap_overrides',
  {
    ruleId: text('rule_id').notNull().references(() => endUserCapRules.id, { onDelete: 'cascade' }),
    /** The customer's own id, as sent in `metadata.user_id` (up to 256 characters). */
    endUserId: text('end_user_id').notNull(),
    amount: numeric('amount').notNull(),
    version: integer('version').notNull().default(1),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.ruleId, t.endUserId] })],
);
