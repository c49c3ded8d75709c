import { and, eq, gt, inArray, lte, sql } from 'drizzle-orm';
import { commitments, modelPrices, priceSnapshots, type CommitmentRow } from '../db/schema';
import { MCP_CALL_ENDPOINT } from '../mcp/log-endpoint';
import type { Executor } from '../db/client';
import { countedLedgerRows } from '../spend/ledger';
import { FAILURE_REASONS, type ConnectionWindow, type FailureReason } from './detectors/connection-failing';
import { DAY_MS } from './detectors/robust';
import type { Crossing } from './detectors/threshold-crossed';
import type { HourlySpend, SpendSeries } from './detectors/spend-anomaly';
import type { UnpricedModel } from './detectors/unpriced-traffic';
import type { LatencyWindow } from './detectors/traffic-regression';
import type { AnsweredMismatch, ServedModels } from './detectors/model-changed';
import type { BudgetUse } from './detectors/forecast-over-budget';
import { nextReset, periodStart } from '../spend/periods';
import type { PriceEntry } from '../routing/org-config';

/**
 * What the detectors read (DESIGN 4b): the hourly usage rollup, the budget crossings and the
 * request log, never the hot path. Each query answers the plain series a detector takes.
 */


type Row = Record<string, unknown>;

/**
 * The organizations a detector's run looks at: one page of them (issue 34: a run pages through
 * organizations, so one large tenant's page cannot fail the others'), or every one when absent.
 */
export type OrgPage = readonly string[] | undefined;

/** ` and <column> in (<page>)`, or nothing for every organization. */
function inPage(column: string, orgs: OrgPage) {
  if (orgs === undefined) return sql``;
  return orgs.length === 0 ? sql` and false` : sql` and ${sql.raw(column)} in ${orgs}`;
}
async function rows(db: Executor, query: ReturnType<typeof sql>): Promise<Row[]> {
  return (await db.execute(query)).rows as Row[];
}

/**
 * Hourly spend of every organization, project, key and end customer that spent in `target` (an hour's start),
 * over the five weeks before it and the hour itself: the detector needs four full weeks of
 * history for its same-hour-of-week baseline, and so must see whether spend began earlier.
 */
export type SpendSeriesSet = { series: SpendSeries[]; projectOfKey: Map<string, string>; dollarFloorOf: Map<string, number> };

export async function spendSeries(db: Executor, target: Date, orgs?: OrgPage): Promise<SpendSeriesSet> {
  const from = new Date(target.getTime() - 35 * DAY_MS);
  const found = await rows(db, sql`
    select org_id, project_id, key_id, hour, sum(cost)::float8 as cost, sum(requests)::int as requests
    from usage_hourly
    where hour >= ${from.toISOString()}::timestamptz and hour <= ${target.toISOString()}::timestamptz
      and org_id in (select distinct org_id from usage_hourly where hour = ${target.toISOString()}::timestamptz and requests > 0${inPage('org_id', orgs)})
    group by org_id, project_id, key_id, hour`);
  const series = new Map<string, SpendSeries & { byHour: Map<number, HourlySpend> }>();
  const add = (orgId: string, kind: SpendSeries['scope']['kind'], id: string, hour: Date, cost: number, requests: number) => {
    const name = `${orgId}|${kind}|${id}`;
    let s = series.get(name);
    if (!s) series.set(name, (s = { orgId, scope: { kind, id }, hours: [], byHour: new Map() }));
    const at = s.byHour.get(hour.getTime());
    if (at) {
      at.cost += cost;
      at.requests += requests;
    } else {
      const entry = { hour, cost, requests };
      s.byHour.set(hour.getTime(), entry);
      s.hours.push(entry);
    }
  };
  const projectOfKey = new Map<string, string>();
  for (const r of found) {
    const orgId = String(r.org_id);
    projectOfKey.set(String(r.key_id), String(r.project_id));
    const hour = new Date(r.hour as string | Date);
    const cost = Number(r.cost);
    const requests = Number(r.requests);
    add(orgId, 'organization', orgId, hour, cost, requests);
    add(orgId, 'project', String(r.project_id), hour, cost, requests);
    add(orgId, 'key', String(r.key_id), hour, cost, requests);
  }
  // End customers who spent in the hour, each their own series (findings about them notify
  // only rules with `include_end_user`): their history only, not every customer's.
  const customers = await rows(db, sql`
    select org_id, user_id, hour, sum(cost)::float8 as cost, sum(requests)::int as requests
    from usage_hourly
    where hour >= ${from.toISOString()}::timestamptz and hour <= ${target.toISOString()}::timestamptz
      and (org_id, user_id) in (select distinct org_id, user_id from usage_hourly where hour = ${target.toISOString()}::timestamptz and requests > 0 and user_id <> ''${inPage('org_id', orgs)})
    group by org_id, user_id, hour`);
  for (const r of customers) add(String(r.org_id), 'end_user', String(r.user_id), new Date(r.hour as string | Date), Number(r.cost), Number(r.requests));
  const sorted = [...series.values()].map(({ orgId, scope, hours }) => ({ orgId, scope, hours: hours.sort((a, b) => a.hour.getTime() - b.hour.getTime()) }));
  const orgIds = [...new Set(sorted.map((s) => s.orgId))];
  const floors = orgIds.length === 0 ? [] : await rows(db, sql`select org_id, anomaly_dollar_floor::float8 as floor from org_settings where org_id in ${orgIds}`);
  return { series: sorted, projectOfKey, dollarFloorOf: new Map(floors.map((r) => [String(r.org_id), Number(r.floor)])) };
}

/** Requests served in the hour `[from, from + 1 h)` by a model with no price, per organization and model. */
/**
 * Answered requests with no price in the last `from` to `to` (the last 60 minutes up to now),
 * from the request log: the hourly rollup would only tell about a whole clock hour, an hour late.
 * As the rollup counts them: status 2xx, cost null, by the model asked for.
 */
export async function unpricedModels(db: Executor, from: Date, to: Date, orgs?: OrgPage): Promise<UnpricedModel[]> {
  const found = await rows(db, sql`
    select org_id, coalesce(requested_model, '') as model, count(*)::int as requests from request_logs
    where created_at > ${from.toISOString()}::timestamptz and created_at <= ${to.toISOString()}::timestamptz
      and cost is null and status between 200 and 299${inPage('org_id', orgs)}
    group by 1, 2`);
  return found.map((r) => ({ orgId: String(r.org_id), model: String(r.model) || '(unnamed)', from, to, requests: Number(r.requests) }));
}

/** Which budget a crossing's scope kind is (spec 2.6 names). */
const BUDGET_OF_SCOPE: Record<string, string> = { project: 'spend_limit', member: 'member_budget', organization: 'hard_cap', key: 'credit_limit' };

/** Budget `alert_at` crossings recorded since `since` (spec 2.6). */
export async function recentCrossings(db: Executor, since: Date, orgs?: OrgPage): Promise<Crossing[]> {
  const found = await rows(db, sql`
    select org_id, scope, "window", fraction::float8 as fraction, "limit"::float8 as "limit", spent::float8 as spent, crossed_at
    from budget_crossings where crossed_at > ${since.toISOString()}::timestamptz${inPage('org_id', orgs)}`);
  return found.map((r) => {
    const [kind, ...rest] = String(r.scope).split(':');
    return {
      orgId: String(r.org_id),
      scope: { kind: kind as Crossing['scope']['kind'], id: rest.join(':') },
      budget: BUDGET_OF_SCOPE[kind!] ?? `${kind}_budget`,
      window: String(r.window),
      fraction: Number(r.fraction),
      limit: Number(r.limit),
      spent: Number(r.spent),
      crossedAt: new Date(r.crossed_at as string | Date),
    };
  });
}


/** Every connection's attempts in `[from, to)` from the request log, failures by reason class. */
export async function connectionWindows(db: Executor, from: Date, to: Date, orgs?: OrgPage): Promise<ConnectionWindow[]> {
  const found = await rows(db, sql`
    select r.org_id, a->>'connection_id' as connection_id, a->>'outcome' as outcome, count(*)::int as n
    from request_logs r, jsonb_array_elements(r.attempts) a
    where r.created_at >= ${from.toISOString()}::timestamptz and r.created_at < ${to.toISOString()}::timestamptz${inPage('r.org_id', orgs)}
    group by 1, 2, 3`);
  const windows = new Map<string, ConnectionWindow>();
  for (const r of found) {
    const name = `${r.org_id}|${r.connection_id}`;
    let w = windows.get(name);
    if (!w) {
      w = { orgId: String(r.org_id), connectionId: String(r.connection_id), from, to, attempts: 0, failures: { credential: 0, rate_limit: 0, server_error: 0, timeout: 0, connection: 0 } };
      windows.set(name, w);
    }
    const n = Number(r.n);
    w.attempts += n;
    const outcome = String(r.outcome) as FailureReason;
    if (FAILURE_REASONS.includes(outcome)) w.failures[outcome] += n;
  }
  return [...windows.values()];
}

/**
 * Latency p95 and error rate of each (served model, connection) in `[from, to)` against the
 * seven days before `from`.
 */
export async function latencyWindows(db: Executor, from: Date, to: Date, orgs?: OrgPage): Promise<LatencyWindow[]> {
  const trailingFrom = new Date(from.getTime() - 7 * DAY_MS);
  const found = await rows(db, sql`
    select org_id, served_model, connection_id, created_at >= ${from.toISOString()}::timestamptz as current,
      count(*)::int as requests,
      coalesce(percentile_cont(0.95) within group (order by latency_ms), 0)::float8 as p95,
      (count(*) filter (where status >= 500))::float8 / greatest(count(*), 1) as error_rate
    from request_logs
    where created_at >= ${trailingFrom.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz
      and served_model is not null and connection_id is not null
      and endpoint <> ${MCP_CALL_ENDPOINT} and cache_status is distinct from 'hit'${inPage('org_id', orgs)}
    group by 1, 2, 3, 4`);
  const windows = new Map<string, LatencyWindow>();
  for (const r of found) {
    const name = `${r.org_id}|${r.served_model}|${r.connection_id}`;
    let w = windows.get(name);
    if (!w) {
      w = { orgId: String(r.org_id), model: String(r.served_model), connectionId: String(r.connection_id), from, to, current: { requests: 0, p95Ms: 0, errorRate: 0 }, trailing: { requests: 0, p95Ms: 0, errorRate: 0 } };
      windows.set(name, w);
    }
    w[r.current ? 'current' : 'trailing'] = { requests: Number(r.requests), p95Ms: Number(r.p95), errorRate: Number(r.error_rate) };
  }
  return [...windows.values()].filter((w) => w.current.requests > 0);
}

/**
 * The models that served each route and each requested model in `[from, to)`, beside those
 * that served it in the seven days before.
 */
export async function servedModels(db: Executor, from: Date, to: Date, orgs?: OrgPage): Promise<ServedModels[]> {
  const trailingFrom = new Date(from.getTime() - 7 * DAY_MS);
  const found = await rows(db, sql`
    select org_id, case when route_slug is not null then 'route' else 'model' end as asked_kind,
      coalesce(route_slug, requested_model) as asked, served_model,
      created_at >= ${from.toISOString()}::timestamptz as current, count(*)::int as requests,
      min(created_at) as first_at
    from request_logs
    where created_at >= ${trailingFrom.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz
      and served_model is not null and coalesce(route_slug, requested_model) is not null
      and endpoint <> ${MCP_CALL_ENDPOINT}${inPage('org_id', orgs)}
    group by 1, 2, 3, 4, 5`);
  const byAsked = new Map<string, ServedModels>();
  for (const r of found) {
    const name = `${r.org_id}|${r.asked_kind}|${r.asked}`;
    let s = byAsked.get(name);
    if (!s) {
      s = { orgId: String(r.org_id), asked: { kind: r.asked_kind as 'route' | 'model', id: String(r.asked) }, from, to, current: {}, trailing: [], hasHistory: false };
      byAsked.set(name, s);
    }
    if (r.current) s.current[String(r.served_model)] = Number(r.requests);
    else {
      s.trailing.push(String(r.served_model));
      s.hasHistory = true;
    }
  }
  return [...byAsked.values()].filter((s) => Object.keys(s.current).length > 0);
}

type BudgetRow = { orgId: string; scope: BudgetUse['scope']; budget: BudgetUse['budget']; limit: number; period: 'daily' | 'weekly' | 'monthly'; column: 'lineage_id' | 'project_id' | 'member_id' | 'org_id'; value: string };

/**
 * Every period budget of the organizations that spent in the last 24 hours (spec 2.6: a key's
 * `credit_limit` with a period, a project's and a member's `spend_limit`, the organization's
 * `hard_cap` and `monthly_target`), with its spend so far in its current period and in the last
 * 24 hours, from the settled spend ledger.
 */
export async function budgetUses(db: Executor, now: Date, orgs?: OrgPage): Promise<Array<BudgetUse & { projectId: string | null }>> {
  const dayAgo = new Date(now.getTime() - DAY_MS).toISOString();
  const active = sql`(select distinct org_id from spend_ledger where state = 'settled' and created_at > ${dayAgo}::timestamptz${inPage('org_id', orgs)})`;
  const found = await rows(db, sql`
    select * from (
      select distinct on (k.lineage_id) k.org_id, 'key' as kind, k.lineage_id as scope_id, 'credit_limit' as budget,
        (k.credit_limit->>'amount')::float8 as "limit", k.credit_limit->>'period' as period, 'lineage_id' as col, k.lineage_id as value, k.project_id as project
      from gateway_keys k where k.credit_limit is not null and k.credit_limit->>'period' <> 'never' and k.revoked_at is null and k.org_id in ${active}
      order by k.lineage_id, k.created_at desc
    ) keys
    union all
    select p.org_id, 'project', p.id, 'spend_limit', (p.spend_limit->>'monthly')::float8, 'monthly', 'project_id', p.id, p.id
      from projects p where p.spend_limit is not null and p.archived_at is null and p.org_id in ${active}
    union all
    select m.org_id, 'member', m.id, 'member_budget', (m.spend_limit->>'monthly')::float8, 'monthly', 'member_id', m.id, null
      from member_budgets m where m.spend_limit is not null and m.org_id in ${active}
    union all
    select s.org_id, 'organization', s.org_id, 'hard_cap', (s.hard_cap->>'monthly')::float8, 'monthly', 'org_id', s.org_id, null
      from org_settings s where s.hard_cap is not null and s.org_id in ${active}
    union all
    select s.org_id, 'organization', s.org_id, 'monthly_target', s.monthly_target::float8, 'monthly', 'org_id', s.org_id, null
      from org_settings s where s.monthly_target is not null and s.org_id in ${active}`);
  if (found.length === 0) return [];
  const billingDays = new Map((await rows(db, sql`select org_id, billing_day_of_month from org_settings where org_id in ${active}`))
    .map((r) => [String(r.org_id), Number(r.billing_day_of_month)]));
  const uses: Array<BudgetUse & { projectId: string | null }> = [];
  for (const r of found) {
    const budget: BudgetRow = {
      orgId: String(r.org_id), scope: { kind: r.kind as BudgetUse['scope']['kind'], id: String(r.scope_id) }, budget: r.budget as BudgetUse['budget'],
      limit: Number(r.limit), period: r.period as BudgetRow['period'], column: r.col as BudgetRow['column'], value: String(r.value),
    };
    const billingDay = billingDays.get(budget.orgId) ?? 1;
    const start = periodStart(budget.period, now, billingDay);
    const end = nextReset(budget.period, start, billingDay);
    const since = new Date(Math.min(start.getTime(), now.getTime() - DAY_MS)).toISOString();
    // Each row counted once: a lapsed lease's row with the requests it covers is their larger (countedLedgerRows).
    const scope = sql`org_id = ${budget.orgId} and ${sql.identifier(budget.column)} = ${budget.value} and created_at >= ${since}::timestamptz and created_at <= ${now.toISOString()}::timestamptz`;
    const [spend] = await rows(db, sql`
      select coalesce(sum(counted) filter (where created_at >= ${start.toISOString()}::timestamptz), 0)::float8 as spent,
             coalesce(sum(counted) filter (where created_at > ${dayAgo}::timestamptz), 0)::float8 as last24h
      from ${countedLedgerRows(scope)} as rows`);
    uses.push({
      orgId: budget.orgId, scope: budget.scope, budget: budget.budget, limit: budget.limit, periodStart: start, periodEnd: end,
      spent: Number(spend!.spent), last24h: Number(spend!.last24h), projectId: r.project === null ? null : String(r.project),
    });
  }
  return uses;
}

/** Requests of one model whose provider reported their cost, in one day, with their token sums. */
export type ProviderCostDay = {
  orgId: string; provider: string; model: string; day: Date; requests: number; reported: number;
  promptTokens: number; cachedTokens: number; completionTokens: number;
};

/** The day `[day, day + 1 d)`'s requests priced by the provider's own figure, per organization, provider and model. */
export async function providerCostDays(db: Executor, day: Date, orgs?: OrgPage): Promise<ProviderCostDay[]> {
  const to = new Date(day.getTime() + DAY_MS);
  const found = await rows(db, sql`
    select org_id, provider, served_model, count(*)::int as requests, sum(cost)::float8 as reported,
      sum(coalesce((usage->>'prompt_tokens')::bigint, 0))::float8 as prompt,
      sum(coalesce((usage->'prompt_tokens_details'->>'cached_tokens')::bigint, 0))::float8 as cached,
      sum(coalesce((usage->>'completion_tokens')::bigint, 0))::float8 as completion
    from request_logs
    where created_at >= ${day.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz
      and price_source = 'provider' and cost is not null and served_model is not null and provider is not null${inPage('org_id', orgs)}
    group by 1, 2, 3`);
  return found.map((r) => ({
    orgId: String(r.org_id), provider: String(r.provider), model: String(r.served_model), day, requests: Number(r.requests), reported: Number(r.reported),
    promptTokens: Number(r.prompt), cachedTokens: Number(r.cached), completionTokens: Number(r.completion),
  }));
}

/** An organization's custom rates, as the chat path prices with them (OrgConfig `prices`). */
export async function orgPrices(db: Executor, orgId: string): Promise<PriceEntry[]> {
  return db.select({
    model: modelPrices.model, provider: modelPrices.provider, inputPerMillion: modelPrices.inputPerMillion, outputPerMillion: modelPrices.outputPerMillion,
    cachedInputPerMillion: modelPrices.cachedInputPerMillion, unit: modelPrices.unit,
  }).from(modelPrices).where(eq(modelPrices.orgId, orgId));
}

/** The (organization, provider, model)s that served requests in `[from, to)`. */
export async function servedModelKeys(db: Executor, from: Date, to: Date, orgs?: OrgPage): Promise<Array<{ orgId: string; provider: string; model: string }>> {
  const found = await rows(db, sql`
    select distinct org_id, provider, served_model from request_logs
    where created_at >= ${from.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz
      and served_model is not null and provider is not null${inPage('org_id', orgs)}`);
  return found.map((r) => ({ orgId: String(r.org_id), provider: String(r.provider), model: String(r.served_model) }));
}

export type PricePoint = { input: number | null; output: number | null };

/**
 * Records a model's effective price now and answers the one recorded before it, if any: what
 * a price change is measured against. One row per organization, provider and model.
 */
export async function readPriceSnapshot(db: Executor, key: { orgId: string; provider: string; model: string }): Promise<PricePoint | null> {
  const [before] = await db.select().from(priceSnapshots)
    .where(and(eq(priceSnapshots.orgId, key.orgId), eq(priceSnapshots.provider, key.provider), eq(priceSnapshots.model, key.model)));
  return before ? { input: before.inputPerMillion, output: before.outputPerMillion } : null;
}

/** Keeps `current` as the price seen; written only once the run's findings are recorded (a retried run must still see the change). */
export async function writePriceSnapshot(db: Executor, key: { orgId: string; provider: string; model: string }, current: PricePoint, now: Date): Promise<void> {
  const values = { inputPerMillion: current.input, outputPerMillion: current.output, seenAt: now };
  await db.insert(priceSnapshots).values(Object.assign({ orgId: key.orgId, provider: key.provider, model: key.model }, values))
    .onConflictDoUpdate({ target: [priceSnapshots.orgId, priceSnapshots.provider, priceSnapshots.model], set: values });
}

/**
 * Answers in `[from, to)` naming another model than the connection was asked for. A dated
 * snapshot of the asked model (`gpt-4o` answered as `gpt-4o-2024-11-20`) is the same model and
 * not counted: providers answer so as a rule, and flagging it would be noise every hour.
 */
export async function answeredMismatches(db: Executor, from: Date, to: Date, orgs?: OrgPage): Promise<AnsweredMismatch[]> {
  const found = await rows(db, sql`
    select r.org_id, r.connection_id, a->>'model' as asked, r.served_model as answered, count(*)::int as requests
    from request_logs r, jsonb_array_elements(r.attempts) a
    where r.created_at >= ${from.toISOString()}::timestamptz and r.created_at < ${to.toISOString()}::timestamptz
      and a->>'outcome' = 'ok' and r.connection_id is not null and r.served_model is not null
      and a->>'connection_id' = r.connection_id and a->>'model' <> r.served_model
      and not starts_with(r.served_model, a->>'model') and not starts_with(a->>'model', r.served_model)${inPage('r.org_id', orgs)}
    group by 1, 2, 3, 4`);
  return found.map((r) => ({ orgId: String(r.org_id), connectionId: String(r.connection_id), asked: String(r.asked), answered: String(r.answered), requests: Number(r.requests), from, to }));
}

/** Commitments whose period holds `now`. */
export async function activeCommitments(db: Executor, now: Date, orgs?: OrgPage): Promise<CommitmentRow[]> {
  return db.select().from(commitments).where(and(lte(commitments.periodStart, now), gt(commitments.periodEnd, now), orgs === undefined ? undefined : orgs.length ? inArray(commitments.orgId, [...orgs]) : sql`false`));
}
