import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { roleAtLeast } from '../../../core/auth/scopes';
import { orgSettings, UNPRICED_BUDGET_POLICIES } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { MAX_CACHE_TTL_SECONDS, MIN_CACHE_TTL_SECONDS, PLAN_MAX_CACHE_TTL_SECONDS } from '../../../core/response-cache/policy';
import { spendLimitSchema, unixTime } from './fields';
import { selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

type SettingsRow = typeof orgSettings.$inferSelect;

const settable = {
  monthly_target: z.number().min(0).max(1_000_000_000).nullable(),
  hard_cap: spendLimitSchema.nullable(),
  unpriced_budget_policy: z.enum(UNPRICED_BUDGET_POLICIES),
  prompt_logging_enabled: z.boolean(),
  prompt_logging_retention_days: z.number().int().min(1).max(3650),
  model_allowlist: z.array(z.string().min(1).max(200)).max(500),
  billing_day_of_month: z.number().int().min(1).max(28),
  /** The response cache (issue 12): off by default; a request can only narrow it. */
  response_cache: z.strictObject({
    enabled: z.boolean(),
    // The upper bound is the plan's (at most MAX_CACHE_TTL_SECONDS), checked in `patch` so that any
    // value over it is `cache_ttl_too_long`, as the spec names it.
    default_ttl_seconds: z.number().int().min(MIN_CACHE_TTL_SECONDS).meta({ description: `At most the plan's maximum TTL (${MAX_CACHE_TTL_SECONDS} seconds on the business plan); more is 400 cache_ttl_too_long.` }),
  }),
  /** Assistant (tool-gateway) access (issue 15); false refuses it with `mcp_disabled`. Owners and admins only. */
  mcp_enabled: z.boolean(),
  /** Alerts (issue 22): a spend anomaly is only news above this many dollars over the usual hour. */
  anomaly_dollar_floor: z.number().min(0).max(1_000_000).describe('`spend.anomaly` needs at least this many dollars above the usual hour (default 5).'),
};
const patchSchema = z.strictObject({ ...settable, response_cache: settable.response_cache.partial() }).partial();

export const orgSettingsResource: ResourceType<SettingsRow> = {
  type: 'org_settings',
  object: 'org_settings',
  scope: 'settings',
  singleton: true,
  table: orgSettings,
  readSchema: z.object({ ...settable, created_at: unixTime, updated_at: unixTime }),
  patchSchema,

  /** The organization's settings; the row with every default appears on first use. */
  async find(db, orgId, id, { forUpdate }) {
    if (id !== orgId) return null;
    await db.insert(orgSettings).values({ id: orgId, orgId }).onConflictDoNothing();
    const query = db.select().from(orgSettings).where(eq(orgSettings.id, orgId));
    return selectOne(query, forUpdate);
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    // Letting unpriced traffic through a blocking budget weakens every budget: owners only.
    if (input.unpriced_budget_policy === 'allow' && row.unpricedBudgetPolicy !== 'allow' && !roleAtLeast(call.principal.role, 'owner')) {
      throw new GatewayError('insufficient_role', 'Only an owner may set `unpriced_budget_policy` to `allow`.');
    }
    if (input.mcp_enabled !== undefined && input.mcp_enabled !== row.mcpEnabled && !roleAtLeast(call.principal.role, 'admin')) {
      throw new GatewayError('insufficient_role', 'Only an owner or admin may turn assistant (tool-gateway) access on or off.');
    }
    let responseCache: SettingsRow['responseCache'] | undefined;
    if (input.response_cache !== undefined) {
      responseCache = { ...row.responseCache, ...input.response_cache };
      const planMax = PLAN_MAX_CACHE_TTL_SECONDS[call.principal.plan];
      if (responseCache.default_ttl_seconds > planMax) {
        throw new GatewayError('cache_ttl_too_long', `\`response_cache.default_ttl_seconds\` may be at most ${planMax} seconds on the ${call.principal.plan} plan.`);
      }
    }
    return {
      ...(responseCache && { responseCache }),
      ...(input.monthly_target !== undefined && { monthlyTarget: input.monthly_target }),
      ...(input.hard_cap !== undefined && { hardCap: input.hard_cap }),
      ...(input.unpriced_budget_policy !== undefined && { unpricedBudgetPolicy: input.unpriced_budget_policy }),
      ...(input.prompt_logging_enabled !== undefined && { promptLoggingEnabled: input.prompt_logging_enabled }),
      ...(input.prompt_logging_retention_days !== undefined && { promptLoggingRetentionDays: input.prompt_logging_retention_days }),
      ...(input.model_allowlist !== undefined && { modelAllowlist: input.model_allowlist }),
      ...(input.billing_day_of_month !== undefined && { billingDayOfMonth: input.billing_day_of_month }),
      ...(input.mcp_enabled !== undefined && { mcpEnabled: input.mcp_enabled }),
      ...(input.anomaly_dollar_floor !== undefined && { anomalyDollarFloor: input.anomaly_dollar_floor }),
    };
  },

  present: (row) => ({
    monthly_target: row.monthlyTarget,
    hard_cap: row.hardCap,
    unpriced_budget_policy: row.unpricedBudgetPolicy,
    prompt_logging_enabled: row.promptLoggingEnabled,
    prompt_logging_retention_days: row.promptLoggingRetentionDays,
    model_allowlist: row.modelAllowlist,
    billing_day_of_month: row.billingDayOfMonth,
    response_cache: row.responseCache,
    mcp_enabled: row.mcpEnabled,
    anomaly_dollar_floor: row.anomalyDollarFloor,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
