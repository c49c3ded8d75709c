import type { Detection } from '../detection';
import { capitalize, DAY_MS, describeScope, formatDollars, formatUtc, HOUR_MS } from './robust';
import type { SpendScope } from './spend-anomaly';

export type BudgetKind = 'credit_limit' | 'spend_limit' | 'member_budget' | 'hard_cap' | 'monthly_target' | 'commitment';

/** One budget's use so far in its current period, and the last day's spend that sets the pace. */
export type BudgetUse = {
  orgId: string;
  scope: SpendScope;
  budget: BudgetKind;
  limit: number;
  periodStart: Date;
  periodEnd: Date;
  spent: number;
  last24h: number;
};

/** Running out within a day leaves no time to act slowly. */
export const FORECAST_CRITICAL_WITHIN_MS = DAY_MS;

const BUDGET_NAMES: Record<BudgetKind, string> = {
  credit_limit: 'credit limit',
  spend_limit: 'spend limit',
  member_budget: 'member budget',
  hard_cap: 'hard cap',
  monthly_target: 'monthly target',
  commitment: 'commitment',
};

/**
 * At the last 24 hours' pace, does the budget run out before its period ends? A budget already
 * used up fires too, with the exhaustion time now. No spend in the last day means no pace and
 * no forecast.
 *
 * The subject names the budget, so each budget of a scope (a key's credit limit beside its
 * project's spend limit) is a finding of its own.
 */
export function detectForecastOverBudget(use: BudgetUse, now: Date): Detection | null {
  const nowMs = now.getTime();
  const endMs = use.periodEnd.getTime();
  // A zero limit has nothing to run out of, and a period that has ended has nothing to forecast.
  if (!(use.limit > 0) || nowMs >= endMs) return null;
  const hourlyRate = use.last24h / 24;
  const projected = use.spent + hourlyRate * ((endMs - nowMs) / HOUR_MS);
  const usedUp = use.spent >= use.limit;
  let exhaustionMs = nowMs;
  if (!usedUp) {
    if (!(hourlyRate > 0) || !(projected > use.limit)) return null;
    exhaustionMs = nowMs + Math.round(((use.limit - use.spent) / hourlyRate) * HOUR_MS);
    if (exhaustionMs >= endMs) return null;
  }
  const exhaustion = new Date(exhaustionMs);

  const budget = BUDGET_NAMES[use.budget];
  const scope = describeScope(use.scope);
  const summary = usedUp
    ? `${capitalize(scope)} has spent ${formatDollars(use.spent)} of its ${formatDollars(use.limit)} ${budget}, `
      + `and its period runs until ${formatUtc(use.periodEnd)}.`
    : `At ${formatDollars(hourlyRate)} an hour, ${scope} reaches its ${formatDollars(use.limit)} ${budget} at ${formatUtc(exhaustion)}, `
      + `before its period ends at ${formatUtc(use.periodEnd)} (${formatDollars(use.spent)} spent, ${formatDollars(projected)} projected).`;
  return {
    orgId: use.orgId,
    type: 'spend.forecast_over_budget',
    severity: exhaustionMs - nowMs <= FORECAST_CRITICAL_WITHIN_MS ? 'critical' : 'warning',
    title: usedUp ? `${capitalize(budget)} of ${scope} used up` : `${capitalize(budget)} of ${scope} forecast to run out`,
    summary,
    scope: { kind: use.scope.kind, id: use.scope.id },
    subject: { budget: use.budget },
    window: { from: use.periodStart, to: now },
    observed: projected,
    expected: use.spent,
    threshold: use.limit,
    evidence: {
      budget: use.budget,
      limit: use.limit,
      spent: use.spent,
      last24h: use.last24h,
      hourly_rate: hourlyRate,
      projected,
      projected_exhaustion_at: exhaustion.toISOString(),
      period_end: use.periodEnd.toISOString(),
    },
  };
}
