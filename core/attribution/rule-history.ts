import { sql } from 'drizzle-orm';
import type { Executor } from '../db/client';
import type { CostAllocation, CostCenterMatch, CostShareRecord } from '../db/schema';
import { toDollars, toNanos } from '../spend/money';
import { firstMatch, orderRules, splitCost, type AllocationRule, type AttributedRequest } from './rules';

/**
 * An organization's cost-center rules as they stood at every moment from `since` on (issue 23):
 * a request is allocated by the rules in force when it was served, even when it is attributed
 * later (with its request-log batch) and a rule changed in between. Each epoch starts where a
 * version took effect or a center was archived, and holds the rules then in force, in the order
 * they are tried. Typically there is one epoch; an organization without rules has none.
 */
export type RuleHistory = { epochs: RuleEpoch[] };
type RuleEpoch = { from: number; rules: AllocationRule[]; archived: ReadonlySet<string> };

/** What allocated a request, and how its cost split; `shares` null when no rule matched (all unallocated). */
export type Allocation = { ruleId: string | null; versionId: string | null; shares: CostShareRecord[] | null };

export const UNALLOCATED: Allocation = Object.freeze({ ruleId: null, versionId: null, shares: null });

type VersionRow = {
  id: string; rule_id: string; version: number; effective_at: Date | string; ended: boolean; priority: number; match: CostCenterMatch;
  cost_center_id: string | null; allocation: CostAllocation | null; rule_created_at: Date | string;
};

const ms = (value: Date | string) => new Date(value).getTime();

/**
 * Loads the versions in force at `since` (each lineage's latest from before it) and every one
 * that took effect after, with the centers archived by then or since. A lineage deleted before
 * `since` has nothing in force and is left out.
 */
export async function loadRuleHistory(db: Executor, orgId: string, since: Date): Promise<RuleHistory> {
  const at = since.toISOString();
  const versions = await db.execute<VersionRow>(sql`
    select v.id, v.rule_id, v.version, v.effective_at, v.ended, v.priority, v.match, v.cost_center_id, v.allocation, r.created_at as rule_created_at
    from cost_center_rule_versions v join cost_center_rules r on r.id = v.rule_id
    where v.org_id = ${orgId} and (r.ended_at is null or r.ended_at > ${at}::timestamptz)
      and (v.effective_at > ${at}::timestamptz or v.id in (
        select distinct on (p.rule_id) p.id from cost_center_rule_versions p
        where p.org_id = ${orgId} and p.effective_at <= ${at}::timestamptz
        order by p.rule_id, p.effective_at desc, p.version desc))`);
  if (versions.rows.length === 0) return { epochs: [] };
  const centers = await db.execute<{ id: string; archived_at: Date | string }>(sql`
    select id, archived_at from cost_centers where org_id = ${orgId} and archived_at is not null`);
  const history = ruleHistoryOf(versions.rows, centers.rows.map((c) => ({ id: c.id, archivedAt: ms(c.archived_at) })), since.getTime());
  await followKeyLineages(db, orgId, history);
  return history;
}

/**
 * A rule naming one key (`key_id` without `*`) matches every key of that key's lineage: a
 * rotation issues a new key id, and the rule must not stop matching. A rotation is a management
 * write, which clears the cached history, so a new key is in the lineage the next load reads.
 */
async function followKeyLineages(db: Executor, orgId: string, history: RuleHistory): Promise<void> {
  const named = new Set<string>();
  for (const epoch of history.epochs) for (const rule of epoch.rules) if (rule.match.key_id && !rule.match.key_id.endsWith('*')) named.add(rule.match.key_id);
  if (named.size === 0) return;
  const found = await db.execute<{ named: string; id: string }>(sql`
    select l.id as named, k.id from gateway_keys l join gateway_keys k on k.lineage_id = l.lineage_id and k.org_id = l.org_id
    where l.org_id = ${orgId} and l.id in (${sql.join([...named].map((id) => sql`${id}`), sql`, `)})`);
  const lineages = new Map<string, Set<string>>();
  for (const row of found.rows) {
    if (!lineages.has(row.named)) lineages.set(row.named, new Set());
    lineages.get(row.named)!.add(row.id);
  }
  for (const epoch of history.epochs) {
    for (const rule of epoch.rules) {
      const lineage = rule.match.key_id ? lineages.get(rule.match.key_id) : undefined;
      if (lineage) rule.keyLineage = lineage;
    }
  }
}

/** The epochs of a set of versions and archived centers (pure; exported for tests). */
export function ruleHistoryOf(rows: readonly VersionRow[], archivedCenters: ReadonlyArray<{ id: string; archivedAt: number }>, since: number): RuleHistory {
  const versions = rows.map((v) => ({ ...v, effectiveAt: ms(v.effective_at) })).sort((x, y) => x.effectiveAt - y.effectiveAt || x.version - y.version);
  const starts = new Set<number>([since]);
  for (const v of versions) if (v.effectiveAt > since) starts.add(v.effectiveAt);
  for (const c of archivedCenters) if (c.archivedAt > since) starts.add(c.archivedAt);
  const epochs = [...starts].sort((a, b) => a - b).map((from): RuleEpoch => {
    // Each lineage's latest version by `from`: versions are in effective order, so the last one seen wins.
    const current = new Map<string, (typeof versions)[number]>();
    for (const v of versions) {
      if (v.effectiveAt > from) break;
      current.set(v.rule_id, v);
    }
    const rules = [...current.values()].filter((v) => !v.ended).map((v): AllocationRule => ({
      ruleId: v.rule_id, versionId: v.id, priority: v.priority, createdAt: new Date(v.rule_created_at), match: v.match,
      costCenterId: v.cost_center_id, allocation: v.allocation,
    }));
    return { from, rules: orderRules(rules), archived: new Set(archivedCenters.filter((c) => c.archivedAt <= from).map((c) => c.id)) };
  });
  return { epochs };
}

/** The epoch in force at `at`; a time before the history's start reads its first epoch. */
function epochAt(history: RuleHistory, at: number): RuleEpoch | null {
  let found: RuleEpoch | null = history.epochs[0] ?? null;
  for (const epoch of history.epochs) {
    if (epoch.from > at) break;
    found = epoch;
  }
  return found;
}

/** Each rule's percents per center, computed once: a rule object belongs to one epoch, so to one archived set. */
const rulePercents = new WeakMap<AllocationRule, Map<string | null, number>>();
function percentsOf(rule: AllocationRule, archived: ReadonlySet<string>): Map<string | null, number> {
  let percents = rulePercents.get(rule);
  if (!percents) {
    // A split of 10,000 hundredths: the same merging of archived centers as the cost's.
    percents = new Map(splitCost(10_000, rule, archived).map((s) => [s.costCenterId, s.nanos / 100]));
    rulePercents.set(rule, percents);
  }
  return percents;
}

/**
 * A request's allocation at `at`: the first matching rule's version and its split of `cost`
 * (dollars; null when the request has none, then the shares carry percents only).
 */
export function allocate(history: RuleHistory, request: AttributedRequest, cost: number | null, at: number): Allocation {
  const epoch = epochAt(history, at);
  if (!epoch || epoch.rules.length === 0) return UNALLOCATED;
  const rule = firstMatch(epoch.rules, request);
  if (!rule) return UNALLOCATED;
  const percents = percentsOf(rule, epoch.archived);
  const shares = cost === null
    ? [...percents].map(([center, percent]) => ({ cost_center_id: center, percent, cost: null }))
    : splitCost(toNanos(cost), rule, epoch.archived).map((s) => ({ cost_center_id: s.costCenterId, percent: percents.get(s.costCenterId)!, cost: toDollars(s.nanos) }));
  return { ruleId: rule.ruleId, versionId: rule.versionId, shares };
}
