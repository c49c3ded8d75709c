import type { AlertSeverity } from '../../db/schema';
import type { Detection } from '../detection';
import { capitalize, describeScope, endUserOf, formatDollars, formatPercent, formatUtc } from './robust';
import type { SpendScope } from './spend-anomaly';
import { windowStartDay } from '../../spend/scopes';

/** A budget's spend crossing one of its alert fractions (0.5, 0.8, 1 ...) in one budget window. */
export type Crossing = {
  orgId: string;
  scope: SpendScope | { kind: 'end_user'; id: string };
  budget: string;
  /** The budget window's start, `YYYY-MM-DD`, or `lifetime`. */
  window: string;
  fraction: number;
  limit: number;
  spent: number;
  crossedAt: Date;
};

export const CROSSING_WARNING_FRACTION = 0.8;
export const CROSSING_CRITICAL_FRACTION = 1;

function crossingSeverity(fraction: number): AlertSeverity {
  if (fraction >= CROSSING_CRITICAL_FRACTION) return 'critical';
  if (fraction >= CROSSING_WARNING_FRACTION) return 'warning';
  return 'info';
}

/**
 * A crossing is a fact, not a judgement: it always makes a detection. Each budget, window and
 * fraction is its own finding (the next month's 80% is news again), so they make the subject;
 * the scope stays the plain scope so findings filter by it.
 */
export function detectThresholdCrossed(c: Crossing): Detection {
  const budget = c.budget.replace(/_/g, ' ');
  const scope = describeScope(c.scope);
  // The window's id names its period and its start day (core/spend/scopes.ts windowId); people read the day.
  const day = windowStartDay(c.window);
  const period = day === null ? 'over its lifetime' : `in the period starting ${day}`;
  return {
    orgId: c.orgId,
    type: 'budget.threshold_crossed',
    severity: crossingSeverity(c.fraction),
    title: `${capitalize(scope)} reached ${formatPercent(c.fraction)} of its ${budget}`,
    summary: `${capitalize(scope)} has spent ${formatDollars(c.spent)} of its ${formatDollars(c.limit)} ${budget} ${period}, `
      + `crossing ${formatPercent(c.fraction)} at ${formatUtc(c.crossedAt)}.`,
    scope: { kind: c.scope.kind, id: c.scope.id },
    subject: { budget: `${c.budget}:${c.window}:${c.fraction}` },
    window: { from: c.crossedAt, to: c.crossedAt },
    observed: c.spent,
    expected: null,
    threshold: c.fraction * c.limit,
    evidence: Object.assign({ budget: c.budget, window: day ?? 'lifetime', fraction: c.fraction, limit: c.limit, spent: c.spent }, c.scope.kind === 'end_user' ? { end_user_id: endUserOf(c.scope.id) } : {}),
  };
}
