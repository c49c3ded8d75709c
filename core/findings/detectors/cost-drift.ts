import type { Detection } from '../detection';
import { DAY_MS, formatCount, formatDay, formatDollars, formatPercent } from './robust';

/**
 * One model's day of requests for which the provider reported a cost: the provider's total and
 * our own estimate for the same requests.
 */
export type ModelDay = {
  orgId: string;
  model: string;
  /** UTC midnight. */
  day: Date;
  requests: number;
  reported: number;
  estimated: number;
};

/** A model's price in dollars per million tokens, before and after a day; null is unpriced. */
export type PriceChange = {
  orgId: string;
  model: string;
  day: Date;
  previous: { input: number | null; output: number | null };
  current: { input: number | null; output: number | null };
};

export const DRIFT_MIN_REQUESTS = 50;
export const DRIFT_WARNING_FRACTION = 0.1;
export const DRIFT_CRITICAL_FRACTION = 0.25;
/** Guards the division when the provider reported $0: any estimate is then all drift. */
const TINY_DOLLARS = 1e-9;

/**
 * Our estimate against the provider's reported cost for a model's day. The provider's bill is
 * the reference, so the drift is relative to what it reported: (estimated - reported) / reported,
 * negative when we under-estimate. Fires above 10% either way, critical above 25%.
 */
export function detectCostDrift(d: ModelDay): Detection | null {
  if (d.requests < DRIFT_MIN_REQUESTS) return null;
  const drift = (d.estimated - d.reported) / Math.max(d.reported, TINY_DOLLARS);
  const size = Math.abs(drift);
  if (!(size > DRIFT_WARNING_FRACTION)) return null;
  const direction = drift > 0 ? 'high' : 'low';
  return {
    orgId: d.orgId,
    type: 'cost.drift',
    severity: size > DRIFT_CRITICAL_FRACTION ? 'critical' : 'warning',
    title: `Cost estimate drift on ${d.model}`,
    summary: `For ${formatCount(d.requests)} requests to ${d.model} on ${formatDay(d.day)} the provider reported ${formatDollars(d.reported)} `
      + `and we estimated ${formatDollars(d.estimated)}, ${formatPercent(size)} ${direction}.`,
    scope: { kind: 'model', id: d.model },
    subject: {},
    window: { from: d.day, to: new Date(d.day.getTime() + DAY_MS) },
    observed: d.reported,
    expected: d.estimated,
    threshold: DRIFT_WARNING_FRACTION,
    evidence: { kind: 'reported_vs_estimated', requests: d.requests, reported: d.reported, estimated: d.estimated, drift },
  };
}

function describePrice(price: number | null): string {
  return price === null ? 'no price' : formatDollars(price, 6);
}

/**
 * A model's price changing is worth knowing (every estimate after it moves) but not alarming.
 * It is the same event type as drift, so to stay a finding of its own its scope id is the model
 * with `#price` appended: the subject has no key that fits a price, and a made-up subject value
 * would be read as a model, connection, route or tool.
 */
export function detectPriceChange(p: PriceChange): Detection | null {
  const changes: string[] = [];
  if (p.previous.input !== p.current.input) changes.push(`input from ${describePrice(p.previous.input)} to ${describePrice(p.current.input)}`);
  if (p.previous.output !== p.current.output) changes.push(`output from ${describePrice(p.previous.output)} to ${describePrice(p.current.output)}`);
  if (changes.length === 0) return null;
  return {
    orgId: p.orgId,
    type: 'cost.drift',
    severity: 'info',
    title: `Price changed for ${p.model}`,
    summary: `The price of ${p.model} per million tokens changed on ${formatDay(p.day)}: ${changes.join(', ')}.`,
    scope: { kind: 'model', id: `${p.model}#price` },
    subject: {},
    window: { from: p.day, to: new Date(p.day.getTime() + DAY_MS) },
    // Two prices changed, not one number: the evidence holds them.
    observed: null,
    expected: null,
    threshold: null,
    evidence: {
      kind: 'price_changed',
      model: p.model,
      previous: { input: p.previous.input, output: p.previous.output },
      current: { input: p.current.input, output: p.current.output },
    },
  };
}
