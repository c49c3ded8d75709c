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

/**
 * A rule as attribution reads it: its current version. `keyLineage`: where `match.key_id`
 * names one key, every key of its lineage (rotation makes a new key id; the rule follows it).
 */
export type AllocationRule = {
  ruleId: string; versionId: string; priority: number; createdAt: Date; match: CostCenterMatch;
  costCenterId: string | null; allocation: CostAllocation | null; keyLineage?: ReadonlySet<string>;
};

/** One cost center's share of a request (`null`: unallocated), in nano-dollars. */
export type CostShare = { costCenterId: string | null; nanos: number };

/** A value ending in `*` matches by prefix; any other, exactly. */
export function valueMatches(pattern: string, value: string | null): boolean {
  if (value === null) return false;
  return pattern.endsWith('*') ? value.startsWith(pattern.slice(0, -1)) : value === pattern;
}

export function ruleMatches(match: CostCenterMatch, r: AttributedRequest, keyLineage?: ReadonlySet<string>): boolean {
  // Field by field, without building anything: this runs for every rule tried on every request.
  if (match.project_id !== undefined && !valueMatches(match.project_id, r.projectId)) return false;
  if (match.key_id !== undefined && !(keyLineage?.has(r.keyId) || valueMatches(match.key_id, r.keyId))) return false;
  if (match.model !== undefined && !valueMatches(match.model, r.model)) return false;
  if (match.provider !== undefined && !valueMatches(match.provider, r.provider)) return false;
  if (match.route !== undefined && !valueMatches(match.route, r.route)) return false;
  if (match.user_id !== undefined && !valueMatches(match.user_id, r.userId)) return false;
  if (match.tags) for (const key in match.tags) if (!valueMatches(match.tags[key]!, r.tags[key] ?? null)) return false;
  return true;
}

/** Rules in the order they are tried: priority, then the older first (a stable, total order). */
export function orderRules(rules: readonly AllocationRule[]): AllocationRule[] {
  return [...rules].sort((x, y) => x.priority - y.priority || x.createdAt.getTime() - y.createdAt.getTime() || (x.ruleId < y.ruleId ? -1 : 1));
}

/** The first rule (of rules in `orderRules` order) that matches, or null: unallocated. */
export function firstMatch(ordered: readonly AllocationRule[], r: AttributedRequest): AllocationRule | null {
  return ordered.find((rule) => ruleMatches(rule.match, r, rule.keyLineage)) ?? null;
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
  const hundredths = parts.map((p) => Math.round(p.percent * 100));
  // Exact in doubles while nanos * 10,000 stays below 2^53 (about $900,000 a request); past that,
  // in bigint, so nothing is ever lost to floats.
  let shares: number[];
  let rests: number[];
  if (nanos <= MAX_NUMBER_NANOS) {
    shares = hundredths.map((h) => Math.floor((nanos * h) / 10_000));
    rests = hundredths.map((h) => (nanos * h) % 10_000);
  } else {
    const products = hundredths.map((h) => BigInt(nanos) * BigInt(h));
    shares = products.map((x) => Number(x / 10_000n));
    rests = products.map((x) => Number(x % 10_000n));
  }
  let left = nanos - shares.reduce((a, b) => a + b, 0);
  if (left > 0) {
    const byRemainder = rests.map((rest, i) => ({ i, rest })).sort((x, y) => y.rest - x.rest || x.i - y.i);
    for (let k = 0; left > 0; k = (k + 1) % byRemainder.length, left--) shares[byRemainder[k]!.i]! += 1;
  }
  if (!parts.some((p) => archived.has(p.cost_center_id))) return parts.map((p, i) => ({ costCenterId: p.cost_center_id, nanos: shares[i]! }));
  const merged = new Map<string | null, number>();
  parts.forEach((p, i) => {
    const center = archived.has(p.cost_center_id) ? null : p.cost_center_id;
    merged.set(center, (merged.get(center) ?? 0) + shares[i]!);
  });
  return [...merged].map(([costCenterId, share]) => ({ costCenterId, nanos: share }));
}

/** The largest cost in nano-dollars whose products with 10,000 are exact doubles. */
const MAX_NUMBER_NANOS = Math.floor(Number.MAX_SAFE_INTEGER / 10_000);
