import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
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

/** What a cost-center rule matches (issue 23): every condition given must hold; `*` at the end of a value is a prefix. */
export type CostCenterMatch = {
  project_id?: string; key_id?: string; model?: string; provider?: string; route?: string; user_id?: string; tags?: Record<string, string>;
};
/** A split: each center's share in percent, up to two decimals, summing to exactly 100. */
export type CostAllocation = Array<{ cost_center_id: string; percent: number }>;

/**
 * What a request or job was charged to (issue 23), as recorded when it was served: each cost
 * center's percent and its part of the cost in dollars (exact nano-dollars; null when the request
 * has no cost). `cost_center_id` null is "unallocated". The parts' costs add up to the request's.
 */
export type CostShareRecord = { cost_center_id: string | null; percent: number; cost: number | null };

/** What a rule says, on the lineage (its current version) and on each version alike. */
function ruleContentColumns() {
  return {
    match: jsonb('match').$type<CostCenterMatch>().notNull(),
    priority: integer('priority').notNull(),
    note: text('note'),
    costCenterId: text('cost_center_id'),
    allocation: jsonb('allocation').$type<CostAllocation | null>(),
  };
}

/**
 * Cost-center rules (spec 2.6, 9.3): the row is the lineage, whose id never changes, carrying
 * its current version; every create, patch and delete appends a version to
 * `cost_center_rule_versions`, so what allocated a request can always be read again.
 */
export const costCenterRules = pgTable(
  'cost_center_rules',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    versionId: text('version_id').notNull(),
    ...ruleContentColumns(),
    /** Set by DELETE: the lineage ended (its final version says so); reads no longer show it. */
    endedAt: timestamp('ended_at', { withTimezone: true }),
    ...resourceColumns(),
  },
  (t) => [index('cost_center_rules_org_priority').on(t.orgId, t.priority)],
);

export const costCenterRuleVersions = pgTable(
  'cost_center_rule_versions',
  {
    id: text('id').primaryKey(),
    ruleId: text('rule_id').notNull().references(() => costCenterRules.id, { onDelete: 'cascade' }),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    /** The lineage's version number this became (its ETag). */
    version: integer('version').notNull(),
    ...ruleContentColumns(),
    /** The final version of a deleted rule: it allocates nothing from its effective time on. */
    ended: boolean('ended').notNull().default(false),
    effectiveAt: timestamp('effective_at', { withTimezone: true }).notNull(),
    actorTokenId: text('actor_token_id'),
  },
  (t) => [
    uniqueIndex('cost_center_rule_versions_rule_version').on(t.ruleId, t.version),
    /** Attribution loads an organization's versions in force from a time on (core/attribution/rule-history.ts). */
    index('cost_center_rule_versions_org_effective').on(t.orgId, t.ruleId, t.effectiveAt),
  ],
);

export type CostCenterRuleRow = typeof costCenterRules.$inferSelect;
export type CostCenterRuleVersionRow = typeof costCenterRuleVersions.$inferSelect;
