import type { Detection } from '../detection';
import { formatCount, formatRange } from './robust';

/** Requests in a window to a model the gateway has no price for. */
export type UnpricedModel = { orgId: string; model: string; from: Date; to: Date; requests: number };

/**
 * Traffic with no price has an unknown cost, which budgets and spend alerts cannot see. The
 * finding says so and never states a cost: $0 would be a claim the gateway cannot make.
 */
export function detectUnpricedTraffic(u: UnpricedModel): Detection | null {
  if (!(u.requests > 0)) return null;
  return {
    orgId: u.orgId,
    type: 'unpriced.traffic',
    severity: 'warning',
    title: `Unpriced traffic to ${u.model}`,
    summary: u.requests === 1
      ? `1 request to ${u.model} ${formatRange(u.from, u.to)} had no price, so its cost is unknown.`
      : `${formatCount(u.requests)} requests to ${u.model} ${formatRange(u.from, u.to)} had no price, so their cost is unknown.`,
    scope: { kind: 'model', id: u.model },
    subject: {},
    window: { from: u.from, to: u.to },
    observed: u.requests,
    expected: null,
    threshold: null,
    evidence: { requests: u.requests },
  };
}
