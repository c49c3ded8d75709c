import type Router from '@koa/router';
import { listEnvelope, singlePage } from '../../../core/paging';
import { and, eq, gte, inArray, isNotNull, isNull, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import type { Clock } from '../../../core/clock';
import type { Database } from '../../../core/db/client';
import { endUserCapOverrides, endUserCapRules, gatewayKeys, memberBudgets, orgSettings, projects, spendLedger } from '../../../core/db/schema';
import type { RedisHandle } from '../../../core/redis';
import { redisScript } from '../../../core/redis-script';
import { decimalDollarsToNanos } from '../../../core/spend/end-user-caps';
import { seedWindow, windowKeys } from '../../../core/spend/holds';
import { ledgerWindowTotal } from '../../../core/spend/ledger';
import { sumNanos, toDollars, toNanos } from '../../../core/spend/money';
import { endUserCapScope, scopeAt, type ScopeInput, type SpendScope } from '../../../core/spend/scopes';
import type { GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';
import { unixSeconds } from './query';

/**
 * `GET /budget_status` (spec 4.4, issue 13; scope `budgets:read`): every enforced spend limit
 * with its current window, read from the very counters the reservation step checks (Redis `s`
 * settled and the live holds), so the figures are the ledger's. A counter lost with Redis is
 * rebuilt from the Postgres ledger exactly as the reservation does (`ledgerWindowTotal`).
 *
 * Limits listed: each key lineage's `credit_limit` (one entry per lineage: rotation shares the
 * limit), each active project's `spend_limit`, each member budget, the organization's
 * `hard_cap`, and under each enabled end-customer cap rule every customer with an override or
 * with spend in the rule's current period (a customer with neither has spent nothing against
 * the rule's default amount). `behavior: alert` limits are listed too: counted, never refused.
 */

const SCOPE_KINDS = ['organization', 'project', 'member', 'key', 'end_user'] as const;

export const budgetStatusSchema = z.object({
  object: z.literal('budget_status'),
  scope: z.enum(SCOPE_KINDS),
  id: z.string().meta({ description: 'What the limit is on: the organization, project, member or key id, or `<rule id>:<end_user_id>`.' }),
  project_id: z.string().nullable(),
  key_id: z.string().nullable().meta({ description: 'For `key`: the lineage\'s current key (spend is shared across rotation).' }),
  lineage_id: z.string().nullable(),
  member_id: z.string().nullable(),
  rule_id: z.string().nullable(),
  end_user_id: z.string().nullable(),
  period: z.enum(['daily', 'weekly', 'monthly', 'never']).meta({ description: '`never`: a key\'s lifetime limit.' }),
  behavior: z.enum(['block', 'alert']),
  limit: z.number().meta({ description: 'Dollars per period.' }),
  spent: z.number().meta({ description: 'Estimated dollars settled in the current period (the spend ledger).' }),
  reserved: z.number().meta({ description: 'Dollars held by requests and jobs under way (live holds).' }),
  remaining: z.number().meta({ description: '`limit - spent - reserved`, never below 0.' }),
  period_start: z.number().int().nullable().meta({ description: 'Unix seconds; null for a lifetime limit.' }),
  resets_at: z.number().int().nullable().meta({ description: 'Unix seconds; null for a lifetime limit.' }),
}).meta({ id: 'BudgetStatus' });

export const budgetStatusListSchema = listEnvelope(budgetStatusSchema);

type Entry = { scope: SpendScope; fields: Partial<Record<'project_id' | 'key_id' | 'lineage_id' | 'member_id' | 'rule_id' | 'end_user_id', string>>; id: string };

/** Settled total and each live hold's amount of every window, in one round trip (the windows share the organization's hash tag). */
const READ = redisScript(`
local now = ARGV[1]
local out = {}
for i = 1, #KEYS / 4 do
  local s = redis.call('GET', KEYS[4 * i - 3])
  local live = redis.call('ZRANGEBYSCORE', KEYS[4 * i - 1], '(' .. now, '+inf')
  out[#out + 1] = s or ''
  out[#out + 1] = #live
  for _, id in ipairs(live) do out[#out + 1] = redis.call('HGET', KEYS[4 * i], id) or '0' end
end
return out
`);

/** Windows read per script call. */
const CHUNK = 250;

type Figures = { settled: string | null; held: bigint };

async function readWindows(redis: RedisHandle['redis'], scopes: SpendScope[], now: Date): Promise<Figures[]> {
  const figures: Figures[] = [];
  for (let i = 0; i < scopes.length; i += CHUNK) {
    const chunk = scopes.slice(i, i + CHUNK);
    const answer = (await READ(redis, chunk.flatMap(windowKeys), [now.getTime()])) as Array<string | number>;
    let at = 0;
    for (let j = 0; j < chunk.length; j++) {
      const settled = String(answer[at++]);
      const count = Number(answer[at++]);
      const held = sumNanos(answer.slice(at, at + count).map(String));
      at += count;
      figures.push({ settled: settled === '' ? null : settled, held });
    }
  }
  return figures;
}

/**
 * The limits in force for the organization, each as the scope its requests count against now.
 * `projectIds` (a project-restricted reader) narrows the end customers listed under the
 * organization-wide cap rule to those who spent in one of those projects this period: the rule
 * counts a customer across every project, and the customer ids of other projects are not the
 * reader's to see (issue 20). Other entries are filtered by `visibleTo`.
 */
async function enforcedLimits(db: Database, orgId: string, now: Date, projectIds: string[] | null): Promise<Entry[]> {
  const [settingsRows, projectRows, keyRows, budgetRows, ruleRows] = await Promise.all([
    db.select({ billingDay: orgSettings.billingDayOfMonth, hardCap: orgSettings.hardCap }).from(orgSettings).where(eq(orgSettings.id, orgId)),
    db.select({ id: projects.id, spendLimit: projects.spendLimit }).from(projects)
      .where(and(eq(projects.orgId, orgId), isNull(projects.archivedAt), isNotNull(projects.spendLimit))),
    db.select({ id: gatewayKeys.id, lineageId: gatewayKeys.lineageId, projectId: gatewayKeys.projectId, creditLimit: gatewayKeys.creditLimit, creditPeriodSince: gatewayKeys.creditPeriodSince, expiresAt: gatewayKeys.expiresAt, createdAt: gatewayKeys.createdAt })
      .from(gatewayKeys).innerJoin(projects, eq(projects.id, gatewayKeys.projectId))
      .where(and(eq(gatewayKeys.orgId, orgId), isNull(gatewayKeys.revokedAt), isNull(projects.archivedAt), isNotNull(gatewayKeys.creditLimit))),
    db.select({ memberId: memberBudgets.id, spendLimit: memberBudgets.spendLimit }).from(memberBudgets)
      .where(and(eq(memberBudgets.orgId, orgId), isNotNull(memberBudgets.spendLimit))),
    db.select().from(endUserCapRules).where(and(eq(endUserCapRules.orgId, orgId), eq(endUserCapRules.enabled, true))),
  ]);
  const billingDay = settingsRows[0]?.billingDay ?? 1;
  const at = (input: ScopeInput) => scopeAt(orgId, input, now, billingDay);
  const entries: Entry[] = [];

  const hardCap = settingsRows[0]?.hardCap;
  if (hardCap) {
    entries.push({ id: orgId, fields: {}, scope: at({ kind: 'organization', id: orgId, code: 'organization_budget', limit: hardCap.monthly, blocking: hardCap.behavior === 'block', period: 'monthly', ledger: { column: 'org_id', value: orgId }, alertAt: hardCap.alert_at }) });
  }
  for (const p of projectRows) {
    const limit = p.spendLimit!;
    entries.push({ id: p.id, fields: { project_id: p.id }, scope: at({ kind: 'project', id: p.id, code: 'project_budget', limit: limit.monthly, blocking: limit.behavior === 'block', period: 'monthly', ledger: { column: 'project_id', value: p.id }, alertAt: limit.alert_at }) });
  }
  for (const b of budgetRows) {
    const limit = b.spendLimit!;
    entries.push({ id: b.memberId, fields: { member_id: b.memberId }, scope: at({ kind: 'member', id: b.memberId, code: 'member_budget', limit: limit.monthly, blocking: limit.behavior === 'block', period: 'monthly', ledger: { column: 'member_id', value: b.memberId }, alertAt: limit.alert_at }) });
  }
  // One entry per lineage: the newest live key carries the limit the gateway enforces.
  const lineages = new Map<string, (typeof keyRows)[number]>();
  for (const k of keyRows) {
    if (k.expiresAt && k.expiresAt <= now) continue;
    const seen = lineages.get(k.lineageId);
    if (!seen || k.createdAt > seen.createdAt || (k.createdAt.getTime() === seen.createdAt.getTime() && k.id > seen.id)) lineages.set(k.lineageId, k);
  }
  for (const k of lineages.values()) {
    const credit = k.creditLimit!;
    entries.push({
      id: k.id, fields: { key_id: k.id, lineage_id: k.lineageId, project_id: k.projectId },
      scope: at({ kind: 'key', id: k.lineageId, code: credit.period === 'never' ? 'key_lifetime_limit' : 'key_budget', limit: credit.amount, blocking: true, period: credit.period, ledger: { column: 'lineage_id', value: k.lineageId }, periodSince: k.creditPeriodSince }),
    });
  }

  if (ruleRows.length > 0) {
    const overrideRows = await db.select({ ruleId: endUserCapOverrides.ruleId, endUserId: endUserCapOverrides.endUserId, amount: endUserCapOverrides.amount })
      .from(endUserCapOverrides).where(inArray(endUserCapOverrides.ruleId, ruleRows.map((r) => r.id)));
    const overrides = new Map(overrideRows.map((o) => [`${o.ruleId}:${o.endUserId}`, o.amount]));
    const amountUnder = (rule: (typeof ruleRows)[number], endUserId: string): bigint | null => {
      const text = overrides.get(`${rule.id}:${endUserId}`) ?? rule.amount;
      return text === null ? null : decimalDollarsToNanos(text);
    };
    for (const rule of ruleRows) {
      const organizationWide = rule.projectId === null;
      const windowStart = at({ kind: 'end_user', id: rule.id, code: 'end_user_budget', limit: null, blocking: false, period: rule.period, ledger: { column: 'end_user_scope', value: '' } }).windowStart;
      // Under the organization rule a restricted reader sees only its projects' customers: those
      // with spend there this period (an override alone names no project).
      const narrowed = projectIds !== null && organizationWide;
      const inWindow = and(eq(spendLedger.orgId, orgId), inArray(spendLedger.state, ['settled', 'reserved']), gte(spendLedger.createdAt, windowStart));
      // The customers counted under the rule this period, as the request path counts them
      // (core/spend/end-user-caps.ts): the organization rule caps a customer's spend in every
      // project, a project rule the spend under it.
      const spenders = organizationWide
        ? (await db.selectDistinct({ endUserId: spendLedger.endUserId }).from(spendLedger).where(and(
          inWindow, isNotNull(spendLedger.endUserId), narrowed ? inArray(spendLedger.projectId, projectIds!) : undefined,
        ))).map((s) => s.endUserId!)
        : (await db.selectDistinct({ scope: spendLedger.endUserScope }).from(spendLedger).where(and(
          inWindow, sql`starts_with(${spendLedger.endUserScope}, ${`${rule.id}:`})`,
        ))).map((s) => s.scope!.slice(rule.id.length + 1));
      const customers = new Set([
        ...spenders,
        ...(narrowed ? [] : overrideRows.filter((o) => o.ruleId === rule.id).map((o) => o.endUserId)),
      ]);
      for (const endUserId of [...customers].sort()) {
        // Each rule's own amount for the customer: under a project rule both rules are in force,
        // each listed with its own counter.
        const nanos = amountUnder(rule, endUserId);
        if (nanos === null) continue;
        const cap = { endUserId, ruleId: rule.id, organizationWide, amount: toDollars(nanos), period: rule.period, behavior: rule.behavior };
        entries.push({
          id: `${rule.id}:${endUserId}`, fields: { rule_id: rule.id, end_user_id: endUserId, ...(rule.projectId && { project_id: rule.projectId }) },
          scope: endUserCapScope(orgId, cap, now, billingDay),
        });
      }
    }
  }
  return entries;
}

function visibleTo(principal: ManagementPrincipal, entry: Entry): boolean {
  const project = entry.fields.project_id;
  return !principal.projectIds || !project || principal.projectIds.includes(project);
}

export async function budgetStatus(deps: { db: Database; redis: RedisHandle }, principal: ManagementPrincipal, now: Date) {
  const entries = (await enforcedLimits(deps.db, principal.orgId, now, principal.projectIds)).filter((e) => visibleTo(principal, e));
  const scopes = entries.map((e) => e.scope);
  let figures = await readWindows(deps.redis.redis, scopes, now);
  const missing = scopes.filter((_, i) => figures[i]!.settled === null);
  if (missing.length > 0) {
    // Rebuilt from the ledger and seeded as the reservation would (another instance may seed first: NX).
    await Promise.all(missing.map(async (s) => seedWindow(deps.redis.redis, s, await ledgerWindowTotal(deps.db, s))));
    figures = await readWindows(deps.redis.redis, scopes, now);
  }
  const rank = (e: Entry) => SCOPE_KINDS.indexOf(e.scope.kind as (typeof SCOPE_KINDS)[number]);
  const rows = entries.map((entry, i) => {
    const { settled, held } = figures[i]!;
    const spentNanos = sumNanos([settled ?? '0']);
    const limitNanos = BigInt(toNanos(entry.scope.limit!));
    const left = limitNanos - spentNanos - held;
    const lifetime = entry.scope.period === 'never';
    return {
      entry,
      body: {
        object: 'budget_status' as const,
        scope: entry.scope.kind as (typeof SCOPE_KINDS)[number],
        id: entry.id,
        project_id: entry.fields.project_id ?? null,
        key_id: entry.fields.key_id ?? null,
        lineage_id: entry.fields.lineage_id ?? null,
        member_id: entry.fields.member_id ?? null,
        rule_id: entry.fields.rule_id ?? null,
        end_user_id: entry.fields.end_user_id ?? null,
        period: entry.scope.period,
        behavior: entry.scope.behavior,
        limit: entry.scope.limit!,
        spent: toDollars(spentNanos),
        reserved: toDollars(held),
        remaining: toDollars(left > 0n ? left : 0n),
        period_start: lifetime ? null : unixSeconds(entry.scope.windowStart),
        resets_at: entry.scope.resetsAt ? unixSeconds(entry.scope.resetsAt) : null,
      } satisfies z.infer<typeof budgetStatusSchema>,
    };
  });
  rows.sort((a, b) => rank(a.entry) - rank(b.entry) || (a.entry.id < b.entry.id ? -1 : a.entry.id > b.entry.id ? 1 : 0));
  return singlePage(rows.map((r) => r.body));
}

export function budgetStatusRoutes(router: Router<GatewayState>, deps: { db: Database; redis: RedisHandle; clock: Clock; flushSpend(orgId: string): Promise<void> }): void {
  router.get('/budget_status', async (ctx) => {
    const principal = authorize(ctx, 'budgets:read');
    // What this process has settled under its spend leases is counted before the windows are read.
    await deps.flushSpend(principal.orgId);
    ctx.body = await budgetStatus(deps, principal, deps.clock.now());
  });
}

export function budgetStatusPaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  return {
    '/budget_status': {
      get: {
        tags: ['budgets'],
        operationId: 'getBudgetStatus',
        summary: 'Every enforced spend limit (key, project, member, organization, end customers under cap rules) with its period, spend in the current period, live holds, room left and next reset, from the spend ledger. A data operation: no version, not exported. Scope `budgets:read`.',
        responses: { '200': { description: 'Every limit, organization first, then projects, members, keys and end customers.', content: { 'application/json': { schema: budgetStatusListSchema } } }, ...errors },
      },
    },
  };
}
