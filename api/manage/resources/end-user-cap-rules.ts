import { and, eq, inArray, isNull, or, sql } from 'drizzle-orm';
import { z } from 'zod';
import { END_USER_CAP_BEHAVIORS, END_USER_CAP_PERIODS, END_USER_MISSING_ID, endUserCapRules, projects } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { afterCursor, keysetOrder, timestampKey, type Keyset } from '../../../core/paging';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import { decimalDollarsToNanos, isDecimalDollars, MAX_END_USER_CAP_DOLLARS, normalizeDecimalDollars } from '../../../core/spend/end-user-caps';
import { unixTime } from './fields';
import { selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

type RuleRow = typeof endUserCapRules.$inferSelect;

const MAX_NANOS = BigInt(MAX_END_USER_CAP_DOLLARS) * 1_000_000_000n;

/** Spec 2.6: "decimal string of dollars per period"; exact to the nano-dollar, 0 to 1,000,000,000. */
export const decimalDollarsField = z
  .string()
  .refine(isDecimalDollars, 'a decimal string of dollars, such as "25" or "0.50", with at most 9 decimals')
  .refine((text) => !isDecimalDollars(text) || decimalDollarsToNanos(text) <= MAX_NANOS, `at most ${MAX_END_USER_CAP_DOLLARS} dollars`)
  .transform(normalizeDecimalDollars)
  .meta({ description: 'US dollars per period as a decimal string, e.g. "25.50" (at most 9 decimals, 0 to 1000000000).', example: '25.50' });

const settings = {
  amount: decimalDollarsField.nullable().meta({ description: 'Default cap per customer and period; null: no default cap (only overridden customers are capped).' }),
  period: z.enum(END_USER_CAP_PERIODS),
  behavior: z.enum(END_USER_CAP_BEHAVIORS).meta({ description: '`block` refuses with 402 end_user_budget; `alert` only records the crossing.' }),
  missing_id: z.enum(END_USER_MISSING_ID).meta({ description: 'A request without `metadata.user_id`: `serve` it uncapped, or `refuse` it (400 end_user_id_required).' }),
  enabled: z.boolean(),
};

const createSchema = z.strictObject({
  project_id: z.string().min(1).nullable().optional().meta({ description: 'The project the rule is for; null or absent: the organization-wide rule.' }),
  amount: settings.amount.optional(),
  period: settings.period,
  behavior: settings.behavior.optional(),
  missing_id: settings.missing_id.optional(),
  enabled: settings.enabled.optional(),
});

const patchSchema = z.strictObject(settings).partial();

/** A token restricted to projects manages only its projects' rules, not the organization's. */
function requireRuleReach(principal: ManagementPrincipal, projectId: string | null): void {
  const allowed = principal.projectIds;
  if (allowed && (projectId === null || !allowed.includes(projectId))) {
    throw new GatewayError('project_restricted', projectId === null
      ? 'This token is restricted to projects; the organization-wide rule needs an unrestricted token.'
      : 'This token is restricted to other projects.');
  }
}

function settingColumns(input: z.infer<typeof patchSchema>) {
  return {
    ...(input.amount !== undefined && { amount: input.amount }),
    ...(input.period !== undefined && { period: input.period }),
    ...(input.behavior !== undefined && { behavior: input.behavior }),
    ...(input.missing_id !== undefined && { missingId: input.missing_id }),
    ...(input.enabled !== undefined && { enabled: input.enabled }),
  };
}

const duplicate = (what: string) =>
  new GatewayError('invalid_request', `Invalid \`project_id\`: ${what} already has an end-customer cap rule; patch that one instead.`);

/**
 * End-customer cap rules (spec 2.6): one for the organization (`project_id` null) and one per
 * project; overrides under a rule are served by api/manage/end-user-cap-overrides.ts. Managed
 * under the `budgets` scope, like member budgets: a token holding only `end_users:write` manages
 * overrides and nothing else.
 */
export const endUserCapRulesResource: ResourceType<RuleRow> = {
  type: 'end_user_cap_rules',
  object: 'end_user_cap_rule',
  scope: 'budgets',
  table: endUserCapRules,
  readSchema: z.object({
    project_id: z.string().nullable(),
    amount: z.string().nullable().meta({ description: 'Decimal dollars per customer and period, or null for no default cap.' }),
    period: settings.period,
    behavior: settings.behavior,
    missing_id: settings.missing_id,
    enabled: z.boolean(),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    const query = db.select().from(endUserCapRules).where(and(eq(endUserCapRules.orgId, orgId), eq(endUserCapRules.id, id)));
    return selectOne(query, forUpdate);
  },

  /**
   * Natural order: the organization's rule (the default under every project's) first, then
   * projects' in the order they were made. The sort key is that rank then `created_at`.
   */
  async list(db, principal, page) {
    const key = sql<string>`(case when ${endUserCapRules.projectId} is null then '0' else '1' end) || ${timestampKey(endUserCapRules.createdAt)}`;
    const keyset: Keyset = { key, id: endUserCapRules.id, order: 'asc', type: 'text' };
    const allowed = principal.projectIds;
    const rows = await db.select({ row: endUserCapRules, at: key }).from(endUserCapRules)
      .where(and(
        eq(endUserCapRules.orgId, principal.orgId),
        allowed ? or(isNull(endUserCapRules.projectId), inArray(endUserCapRules.projectId, allowed)) : undefined,
        afterCursor(keyset, page.after),
      ))
      .orderBy(...keysetOrder(keyset))
      .limit(page.limit + 1);
    return rows.map(({ row, at }) => ({ row, cursor: { at, id: row.id } }));
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const orgId = call.principal.orgId;
    const projectId = input.project_id ?? null;
    requireRuleReach(call.principal, projectId);
    if (projectId !== null) {
      const [project] = await call.db.select({ id: projects.id }).from(projects).where(and(eq(projects.orgId, orgId), eq(projects.id, projectId)));
      if (!project) throw new GatewayError('invalid_request', `Invalid \`project_id\`: no project \`${projectId}\`.`);
    }
    const [row] = await call.db
      .insert(endUserCapRules)
      .values({
        id: newId('eucap'),
        orgId,
        projectId,
        amount: input.amount ?? null,
        period: input.period,
        behavior: input.behavior ?? 'block',
        missingId: input.missing_id ?? 'serve',
        enabled: input.enabled ?? true,
      })
      .returning();
    return { row: row! };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    requireRuleReach(call.principal, row.projectId);
    return settingColumns(input);
  },

  /** Deletes the rule and, with it, its overrides. */
  async remove(call, row) {
    requireRuleReach(call.principal, row.projectId);
    return 'delete';
  },

  uniqueConflict: (constraint) => {
    if (constraint === 'end_user_cap_rules_org_wide') return duplicate('the organization');
    if (constraint === 'end_user_cap_rules_project') return duplicate('this project');
    return undefined;
  },

  projectOf: (row) => row.projectId,

  present: (row) => ({
    project_id: row.projectId,
    amount: row.amount === null ? null : normalizeDecimalDollars(row.amount),
    period: row.period,
    behavior: row.behavior,
    missing_id: row.missingId,
    enabled: row.enabled,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
