import type { CostAllocation, CostCenterMatch } from '../db/schema';

/**
 * Cost attribution (issue 23) as pure functions over a rule set: which rule allocates a request
 * (the first that matches, by priority), and how its cost splits into cost centers so that the
 * parts always add up to the whole, to the nano-dollar.
 */

/** What a request is matched on. */
export type AttributedRequest = {
  projectId: string; keyId: string; model: string | null; provider: string | null; route: string | null; userId: string | null;
  tags: Record<string, string>;
};

/** A rule as attribution reads it: its current version. */
export type AllocationRule = {
  ruleId: string; versionId: string; priority: number; createdAt: Date; match: CostCenterMatch;
  costCenterId: string | null; allocation: CostAllocation | null;
};

/** One cost center's share of a request (`null`: unallocated), in nano-dollars. */
export type CostShare = { costCenterId: string | null; nanos: number };

/** A value ending in `*` matches by prefix; any other, exactly. */
export function valueMatches(pattern: string, value: string | null): boolean {
  if (value === null) return false;
  return pattern.endsWith('*') ? value.startsWith(pattern.slice(0, -1)) : value === pattern;
}

export function ruleMatches(match: CostCenterMatch, r: AttributedRequest): boolean {
  const fields: Array<[string | undefined, string | null]> = [
    [match.project_id, r.projectId], [match.key_id, r.keyId], [match.model, r.model], [match.provider, r.provider], [match.route, r.route], [match.user_id, r.userId],
  ];
  if (fields.some(([pattern, value]) => pattern !== undefined && !valueMatches(pattern, value))) return false;
  return Object.entries(match.tags ?? {}).every(([key, pattern]) => valueMatches(pattern, r.tags[key] ?? null));
}

/** Rules in the order they are tried: priority, then the older first (a stable, total order). */
export function orderRules(rules: readonly AllocationRule[]): AllocationRule[] {
  return [...rules].sort((x, y) => x.priority - y.priority || x.createdAt.getTime() - y.createdAt.getTime() || (x.ruleId < y.ruleId ? -1 : 1));
}

/** The first rule (of rules in `orderRules` order) that matches, or null: unallocated. */
export function firstMatch(ordered: readonly AllocationRule[], r: AttributedRequest): AllocationRule | null {
  return ordered.find((rule) => ruleMatches(rule.match, r)) ?? null;
}

/**
 * A request's cost split by its rule: shares in hundredths of a percent, rounded down, and the
 * nano-dollars left over by rounding given one by one to the largest remainders (ties to the
 * earlier share), so the parts sum to the cost exactly. A share of an archived center goes to
 * "unallocated" (null); no rule is all unallocated.
 */
export function splitCost(nanos: number, rule: AllocationRule | null, archived: ReadonlySet<string>): CostShare[] {
  if (!rule) return [{ costCenterId: null, nanos }];
  const parts: CostAllocation = rule.allocation ?? [{ cost_center_id: rule.costCenterId!, percent: 100 }];
  // In integers (bigint: a large cost times 10,000 passes 2^53), so nothing is lost to floats.
  const products = parts.map((p) => BigInt(nanos) * BigInt(Math.round(p.percent * 100)));
  const shares = products.map((x) => Number(x / 10_000n));
  let left = nanos - shares.reduce((a, b) => a + b, 0);
  const byRemainder = products.map((x, i) => ({ i, rest: Number(x % 10_000n) })).sort((x, y) => y.rest - x.rest || x.i - y.i);
  for (let k = 0; left > 0; k = (k + 1) % byRemainder.length, left--) shares[byRemainder[k]!.i]! += 1;
  const merged = new Map<string | null, number>();
  parts.forEach((p, i) => {
    const center = archived.has(p.cost_center_id) ? null : p.cost_center_id;
    merged.set(center, (merged.get(center) ?? 0) + shares[i]!);
  });
  return [...merged].map(([costCenterId, share]) => ({ costCenterId, nanos: share }));
}
