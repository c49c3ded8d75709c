import type { Database } from '../db/client';
import { boundedCache } from '../bounded-cache';
import type { RequestLogEntry } from '../request-log/writer';
import { allocate, loadRuleHistory, type RuleHistory } from './rule-history';

/**
 * How far back a cached rule history reaches. A request-log row waits at most a flush (half a
 * second) before it is attributed; a row older than this (a writer backed up for minutes) is
 * allocated by the rules in force at the start of the window.
 */
export const RULE_HISTORY_WINDOW_MS = 15 * 60_000;
/** A safety net under the change messages that clear the cache: a lost one is stale this long at most. */
export const RULE_CACHE_TTL_MS = 60_000;
const MAX_CACHED_ORGANIZATIONS = 10_000;

export type RequestAttribution = {
  /** Fills in each row's cost-center rule, version and split (issue 23), in place. */
  attributeRows(rows: RequestLogEntry[]): Promise<void>;
  /**
   * The same for one row at once, when its organization's rule history is loaded: whether it
   * did. Otherwise the load starts, and the row waits for `attributeRows` in its flush.
   */
  attributeRowNow(row: RequestLogEntry): boolean;
  clearOrg(orgId: string): void;
  clear(): void;
};

/**
 * Cost attribution of request-log rows, run by the request-log writer on each batch before it
 * is inserted (off the request's path). Each organization's rule history is loaded once and
 * kept until a management write to the organization clears it (the config-change channel) or
 * the TTL passes; an organization without rules costs one query a TTL.
 */
export function createRequestAttribution(db: Database, now: () => number = Date.now): RequestAttribution {
  /** An organization's rule history as it loads, and once loaded the history itself. */
  type Cached = { loading: Promise<RuleHistory>; loaded?: RuleHistory };
  const histories = boundedCache<string, Cached>(MAX_CACHED_ORGANIZATIONS, { ttl: RULE_CACHE_TTL_MS });
  const cachedOf = (orgId: string): Cached => {
    let cached = histories.get(orgId);
    if (!cached) {
      const entry: Cached = { loading: loadRuleHistory(db, orgId, new Date(now() - RULE_HISTORY_WINDOW_MS)) };
      entry.loading.then((history) => (entry.loaded = history), () => {
        // A failed load is not kept: the next batch asks again.
        if (histories.get(orgId) === entry) histories.delete(orgId);
      });
      histories.set(orgId, (cached = entry));
    }
    return cached;
  };
  const attribute = (row: RequestLogEntry, history: RuleHistory): void => {
    if (history.epochs.length === 0) return;
    const at = row.createdAt instanceof Date ? row.createdAt.getTime() : now();
    const allocation = allocate(history, {
      projectId: row.projectId, keyId: row.keyId, model: row.requestedModel ?? null, provider: row.provider ?? null, route: row.routeSlug ?? null,
      userId: row.userId ?? null, tags: row.tags ?? {},
    }, row.cost ?? null, at);
    row.costRuleId = allocation.ruleId;
    row.costRuleVersionId = allocation.versionId;
    row.costAllocation = allocation.shares;
  };
  return {
    async attributeRows(rows) {
      const orgs = new Map<string, RuleHistory>();
      // One organization's rules failing to load leaves its rows unattributed, never the others'.
      const failed: string[] = [];
      for (const orgId of new Set(rows.map((r) => r.orgId))) {
        await cachedOf(orgId).loading.then((history) => orgs.set(orgId, history), () => failed.push(orgId));
      }
      for (const row of rows) {
        const history = orgs.get(row.orgId);
        if (history) attribute(row, history);
      }
      if (failed.length > 0) throw new Error(`cost-center rules of ${failed.join(', ')} could not be loaded; their rows are written unattributed`);
    },
    attributeRowNow(row) {
      const history = cachedOf(row.orgId).loaded;
      if (!history) return false;
      attribute(row, history);
      return true;
    },
    clearOrg: (orgId) => void histories.delete(orgId),
    clear: () => histories.clear(),
  };
}
