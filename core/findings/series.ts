import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client';
import type { ConnectionWindow, FailureReason } from './detectors/connection-failing';
import type { Crossing } from './detectors/threshold-crossed';
import type { HourlySpend, SpendSeries } from './detectors/spend-anomaly';
import type { UnpricedModel } from './detectors/unpriced-traffic';
import type { LatencyWindow } from './detectors/traffic-regression';
import type { ServedModels } from './detectors/model-changed';

/**
 * What the detectors read (DESIGN 4b): the hourly usage rollup, the budget crossings and the
 * request log, never the hot path. Each query answers the plain series a detector takes.
 */

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

type Row = Record<string, unknown>;
async function rows(db: Executor, query: ReturnType<typeof sql>): Promise<Row[]> {
  return (await db.execute(query)).rows as Row[];
}

/**
 * Hourly spend of every organization, project and key that spent in `target` (an hour's start),
 * over the 28 days before it and the hour itself.
 */
export type SpendSeriesSet = { series: SpendSeries[]; projectOfKey: Map<string, string> };

export async function spendSeries(db: Executor, target: Date): Promise<SpendSeriesSet> {
  const from = new Date(target.getTime() - 28 * DAY_MS);
  const found = await rows(db, sql`
    select org_id, project_id, key_id, hour, sum(cost)::float8 as cost, sum(requests)::int as requests
    from usage_hourly
    where hour >= ${from.toISOString()}::timestamptz and hour <= ${target.toISOString()}::timestamptz
      and org_id in (select distinct org_id from usage_hourly where hour = ${target.toISOString()}::timestamptz and requests > 0)
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
  const sorted = [...series.values()].map(({ orgId, scope, hours }) => ({ orgId, scope, hours: hours.sort((a, b) => a.hour.getTime() - b.hour.getTime()) }));
  return { series: sorted, projectOfKey };
}

/** Requests served in the hour `[from, from + 1 h)` by a model with no price, per organization and model. */
export async function unpricedModels(db: Executor, from: Date): Promise<UnpricedModel[]> {
  const to = new Date(from.getTime() + HOUR_MS);
  const found = await rows(db, sql`
    select org_id, model, sum(unpriced_requests)::int as requests from usage_hourly
    where hour = ${from.toISOString()}::timestamptz and unpriced_requests > 0
    group by org_id, model`);
  return found.map((r) => ({ orgId: String(r.org_id), model: String(r.model) || '(unnamed)', from, to, requests: Number(r.requests) }));
}

/** Budget `alert_at` crossings recorded since `since` (spec 2.6). */
export async function recentCrossings(db: Executor, since: Date): Promise<Crossing[]> {
  const found = await rows(db, sql`
    select org_id, scope, "window", fraction::float8 as fraction, "limit"::float8 as "limit", spent::float8 as spent, crossed_at
    from budget_crossings where crossed_at > ${since.toISOString()}::timestamptz`);
  return found.map((r) => {
    const [kind, ...rest] = String(r.scope).split(':');
    // A member's budget is reported under the organization, naming the member in the budget.
    const scope = kind === 'project' || kind === 'key' || kind === 'organization' ? { kind, id: rest.join(':') } : { kind: 'organization' as const, id: String(r.org_id) };
    return {
      orgId: String(r.org_id),
      scope: scope as Crossing['scope'],
      budget: kind === 'member' ? `member_budget:${rest.join(':')}` : `${kind}_budget`,
      window: String(r.window),
      fraction: Number(r.fraction),
      limit: Number(r.limit),
      spent: Number(r.spent),
      crossedAt: new Date(r.crossed_at as string | Date),
    };
  });
}

const REASONS: readonly FailureReason[] = ['credential', 'rate_limit', 'server_error', 'timeout', 'connection'];

/** Every connection's attempts in `[from, to)` from the request log, failures by reason class. */
export async function connectionWindows(db: Executor, from: Date, to: Date): Promise<ConnectionWindow[]> {
  const found = await rows(db, sql`
    select r.org_id, a->>'connection_id' as connection_id, a->>'outcome' as outcome, count(*)::int as n
    from request_logs r, jsonb_array_elements(r.attempts) a
    where r.created_at >= ${from.toISOString()}::timestamptz and r.created_at < ${to.toISOString()}::timestamptz
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
    if (REASONS.includes(outcome)) w.failures[outcome] += n;
  }
  return [...windows.values()];
}

/**
 * Latency p95 and error rate of each (served model, connection) in `[from, to)` against the
 * seven days before `from`.
 */
export async function latencyWindows(db: Executor, from: Date, to: Date): Promise<LatencyWindow[]> {
  const trailingFrom = new Date(from.getTime() - 7 * DAY_MS);
  const found = await rows(db, sql`
    select org_id, served_model, connection_id, created_at >= ${from.toISOString()}::timestamptz as current,
      count(*)::int as requests,
      coalesce(percentile_cont(0.95) within group (order by latency_ms), 0)::float8 as p95,
      (count(*) filter (where status >= 500))::float8 / greatest(count(*), 1) as error_rate
    from request_logs
    where created_at >= ${trailingFrom.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz
      and served_model is not null and connection_id is not null
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
export async function servedModels(db: Executor, from: Date, to: Date): Promise<ServedModels[]> {
  const trailingFrom = new Date(from.getTime() - 7 * DAY_MS);
  const found = await rows(db, sql`
    select org_id, case when route_slug is not null then 'route' else 'model' end as asked_kind,
      coalesce(route_slug, requested_model) as asked, served_model,
      created_at >= ${from.toISOString()}::timestamptz as current, count(*)::int as requests,
      min(created_at) as first_at
    from request_logs
    where created_at >= ${trailingFrom.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz
      and served_model is not null and coalesce(route_slug, requested_model) is not null
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
