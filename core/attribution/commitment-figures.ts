import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client';
import type { CommitmentRow } from '../db/schema';
import { canonicalModel } from '../catalog/price-data';
import { countedLedgerRows } from '../spend/ledger';
import { decimalToNanos, roundDollars, toDollars } from '../spend/money';

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
  /** Consumed has reached the amount: `projected_exhaustion_at` then says about when. */
  exhausted: boolean;
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
  const exhausted = consumed >= c.amountUsd;
  // Run out already: about when, going back from now at the burn rate by what is over the amount.
  const exhaustionAt = exhausted
    ? Math.max(c.periodStart.getTime(), at - (burn > 0 ? ((consumed - c.amountUsd) / burn) * DAY_MS : 0))
    : burn > 0 ? at + (remaining / burn) * DAY_MS : null;
  return {
    exhausted,
    consumed_usd: consumed,
    remaining_usd: remaining,
    burn_rate_usd_per_day: burn,
    projected_exhaustion_at: exhaustionAt !== null && exhaustionAt <= c.periodEnd.getTime() ? new Date(Math.round(exhaustionAt)) : null,
    projected_unused_usd: roundDollars(Math.max(0, remaining - burn * daysLeft)),
  };
}

/**
 * The settled spend (before discount) on a commitment's provider kind and models: in its period
 * up to now, and in the trailing week of it. From the spend ledger alone, which has every
 * settled chat, media and video cost (the request log's partitions are dropped and a batch
 * can be lost); models match by the price data's canonical model, so a provider's snapshot
 * name counts for the model it stands for.
 */
export async function commitmentSpend(db: Executor, c: Pick<CommitmentRow, 'orgId' | 'providerKind' | 'models' | 'periodStart' | 'periodEnd'>, now: Date): Promise<{ period: number; trailingWeek: number }> {
  const to = new Date(Math.min(now.getTime(), c.periodEnd.getTime()));
  const weekFrom = new Date(Math.max(c.periodStart.getTime(), to.getTime() - BURN_WINDOW_DAYS * DAY_MS));
  const result = await db.execute<{ model: string | null; period: string; week: string }>(sql`
    select model, coalesce(sum(counted), 0)::text as period,
           coalesce(sum(counted) filter (where created_at >= ${weekFrom.toISOString()}::timestamptz), 0)::text as week
    from ${countedLedgerRows(sql`org_id = ${c.orgId} and provider = ${c.providerKind}
      and created_at >= ${c.periodStart.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz`)} as rows
    group by model`);
  const wanted = c.models && c.models.length > 0 ? new Set(c.models.map((m) => canonicalModel(c.providerKind, m))) : null;
  let period = 0n;
  let week = 0n;
  for (const row of result.rows) {
    if (wanted && (row.model === null || !wanted.has(canonicalModel(c.providerKind, row.model)))) continue;
    period += decimalToNanos(row.period);
    week += decimalToNanos(row.week);
  }
  return { period: toDollars(period), trailingWeek: toDollars(week) };
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
