import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client';
import type { CommitmentRow } from '../db/schema';
import { roundDollars } from '../spend/money';

const DAY_MS = 86_400_000;
/** The burn rate is the trailing week's. */
const BURN_WINDOW_DAYS = 7;

/** What a commitment's reads add (issue 23): consumed so far, and where it is heading. */
export type CommitmentFigures = {
  consumed_usd: number;
  remaining_usd: number;
  burn_rate_usd_per_day: number;
  projected_exhaustion_at: Date | null;
  projected_unused_usd: number;
};


/**
 * The figures from two sums of the settled ledger on the commitment's provider kind and models,
 * after its discount: the whole period so far, and the trailing week. Pure, so it is tested on
 * numbers. The burn rate is over the days of that week inside the period (at least one).
 */
export function commitmentFigures(c: Pick<CommitmentRow, 'amountUsd' | 'periodStart' | 'periodEnd' | 'discountPct'>, spend: { period: number; trailingWeek: number }, now: Date): CommitmentFigures {
  const keep = 1 - (c.discountPct ?? 0) / 100;
  const consumed = roundDollars(spend.period * keep);
  const remaining = roundDollars(Math.max(0, c.amountUsd - consumed));
  const at = Math.min(Math.max(now.getTime(), c.periodStart.getTime()), c.periodEnd.getTime());
  const weekDays = Math.max(1, Math.min(BURN_WINDOW_DAYS, (at - c.periodStart.getTime()) / DAY_MS));
  const burn = roundDollars((spend.trailingWeek * keep) / weekDays);
  const daysLeft = (c.periodEnd.getTime() - at) / DAY_MS;
  const exhaustionAt = burn > 0 && remaining > 0 ? at + (remaining / burn) * DAY_MS : null;
  return {
    consumed_usd: consumed,
    remaining_usd: remaining,
    burn_rate_usd_per_day: burn,
    projected_exhaustion_at: exhaustionAt !== null && exhaustionAt <= c.periodEnd.getTime() ? new Date(Math.round(exhaustionAt)) : null,
    projected_unused_usd: roundDollars(Math.max(0, remaining - burn * daysLeft)),
  };
}

/**
 * The settled spend (before discount) on a commitment's provider kind and models: in its period
 * up to now, and in the trailing week of it. A chat or media request's ledger row is matched to
 * its request-log row (provider, served model); a job's to its job.
 */
export async function commitmentSpend(db: Executor, c: Pick<CommitmentRow, 'orgId' | 'providerKind' | 'models' | 'periodStart' | 'periodEnd'>, now: Date): Promise<{ period: number; trailingWeek: number }> {
  const to = new Date(Math.min(now.getTime(), c.periodEnd.getTime()));
  const weekFrom = new Date(Math.max(c.periodStart.getTime(), to.getTime() - BURN_WINDOW_DAYS * DAY_MS));
  const models = c.models && c.models.length > 0 ? c.models : null;
  const modelMatch = (column: ReturnType<typeof sql>) => (models ? sql`and ${column} in ${models}` : sql``);
  const result = await db.execute(sql`
    with spent as (
      select l.amount, l.created_at from spend_ledger l
        join request_logs r on r.id = l.request_id and r.org_id = l.org_id
      where l.org_id = ${c.orgId} and l.state = 'settled' and l.request_id is not null
        and l.created_at >= ${c.periodStart.toISOString()}::timestamptz and l.created_at < ${to.toISOString()}::timestamptz
        and r.provider = ${c.providerKind} ${modelMatch(sql`r.served_model`)}
      union all
      select l.amount, l.created_at from spend_ledger l
        join jobs j on j.id = l.job_id
      where l.org_id = ${c.orgId} and l.state = 'settled' and l.job_id is not null
        and l.created_at >= ${c.periodStart.toISOString()}::timestamptz and l.created_at < ${to.toISOString()}::timestamptz
        and j.provider = ${c.providerKind} ${modelMatch(sql`j.model`)}
    )
    select coalesce(sum(amount), 0)::float8 as period,
           coalesce(sum(amount) filter (where created_at >= ${weekFrom.toISOString()}::timestamptz), 0)::float8 as week
    from spent`);
  const row = result.rows[0] as { period: number; week: number };
  return { period: Number(row.period), trailingWeek: Number(row.week) };
}

/**
 * A commitment as the budget forecast reads it (`spend.forecast_over_budget`, scope kind
 * `commitment`): its amount is the limit, what it consumed the spend so far, and its trailing
 * week's burn the day's pace.
 */
export function commitmentAsBudget(c: Pick<CommitmentRow, 'id' | 'orgId' | 'amountUsd' | 'periodStart' | 'periodEnd'>, figures: CommitmentFigures) {
  return {
    orgId: c.orgId, scope: { kind: 'commitment' as const, id: c.id }, budget: 'commitment' as const, limit: c.amountUsd,
    periodStart: c.periodStart, periodEnd: c.periodEnd, spent: figures.consumed_usd, last24h: figures.burn_rate_usd_per_day,
  };
}
