import { and, eq, isNull } from 'drizzle-orm';
import { boundedCache } from '../bounded-cache';
import type { Sealer } from '../crypto/sealing';
import type { Database } from '../db/client';
import { DEFAULT_RESPONSE_CACHE, memberBudgets, modelPrices, organizations, orgSettings, providerConnections, routes, type FailoverPolicy, type Plan, type ResponseCacheSettings, type RouteRule, type RouteTarget, type SpendLimit } from '../db/schema';
import { FAILURE_KINDS, type FailureKind } from '../providers/types';
import { isProviderKind, type ProviderKind } from '../providers/kinds';
import { openConnection } from '../providers/open-connection';

/** A connection as the hot path uses it: credentials opened, URLs resolved. */
export type ConnectionConfig = {
  id: string;
  kind: ProviderKind;
  name: string;
  environments: string[];
  config: Record<string, unknown>;
  modelMap: Record<string, string>;
  timeoutMs: number | null;
  baseUrl: string;
  alternateBaseUrls: string[];
  poolRole: 'active' | 'standby';
  enabled: boolean;
  secrets: string[];
};

export type FailoverAction = 'retry' | 'failover' | 'stop';

export type RouteConfig = {
  id: string;
  slug: string;
  name: string | null;
  strategy: 'priority' | 'weighted';
  environments: string[];
  timeoutMs: number | null;
  maxRetries: number;
  targets: RouteTarget[];
  rules: RouteRule[];
  failover: Record<FailureKind, FailoverAction>;
  /** How its batches run (issue 56): on the provider's batch API where there is one, or by the gateway. */
  batchMode: 'native' | 'gateway';
};

/** A stored rate (spec 2.6 model prices): per million tokens, or `unit` dollars per image, second or character. */
export type PriceEntry = { model: string; provider: string | null; inputPerMillion: number | null; outputPerMillion: number | null; cachedInputPerMillion: number | null; unit: number | null };

export type OrgConfig = {
  orgId: string;
  connections: ConnectionConfig[];
  routes: Map<string, RouteConfig>;
  prices: PriceEntry[];
  modelAllowlist: string[];
  promptLoggingEnabled: boolean;
  /** The day of the month budget periods start (1 to 28). */
  billingDayOfMonth: number;
  unpricedBudgetPolicy: 'block' | 'allow';
  /** The organization's monthly cap (spec 2.6 `hard_cap`). */
  hardCap: SpendLimit | null;
  /** Members' budgets by member id (only members that have one). */
  memberBudgets: Map<string, SpendLimit>;
  plan: Plan;
  /** The response cache switch and default TTL (`org_settings.response_cache`). */
  responseCache: ResponseCacheSettings;
};

export function fullFailover(stored: FailoverPolicy): Record<FailureKind, FailoverAction> {
  return Object.fromEntries(FAILURE_KINDS.map((k) => [k, stored[k] ?? 'retry'])) as Record<FailureKind, FailoverAction>;
}

export async function loadOrgConfig(db: Database, sealer: Sealer, orgId: string): Promise<OrgConfig> {
  const [connectionRows, routeRows, priceRows, settingsRows, budgetRows, orgRows] = await Promise.all([
    db.select().from(providerConnections).where(and(eq(providerConnections.orgId, orgId), isNull(providerConnections.deletedAt))),
    db.select().from(routes).where(and(eq(routes.orgId, orgId), isNull(routes.deletedAt))),
    db.select().from(modelPrices).where(eq(modelPrices.orgId, orgId)),
    db.select().from(orgSettings).where(eq(orgSettings.id, orgId)),
    db.select({ memberId: memberBudgets.id, spendLimit: memberBudgets.spendLimit }).from(memberBudgets).where(eq(memberBudgets.orgId, orgId)),
    db.select({ plan: organizations.plan }).from(organizations).where(eq(organizations.id, orgId)),
  ]);
  const connections = connectionRows.filter((c) => isProviderKind(c.kind)).map((c): ConnectionConfig => {
    const kind = c.kind as ProviderKind;
    const opened = openConnection(c, sealer);
    return {
      id: c.id,
      kind,
      name: c.name,
      environments: c.environments,
      config: c.config,
      modelMap: c.modelMap,
      timeoutMs: c.timeoutMs,
      baseUrl: opened.baseUrl,
      alternateBaseUrls: c.alternateBaseUrls,
      poolRole: c.poolRole,
      // A connection without a credential (cleared when it moved host) serves nothing until given one.
      enabled: c.status === 'enabled' && opened.secrets.length > 0,
      secrets: opened.secrets,
    };
  });
  return {
    orgId,
    connections,
    routes: new Map(routeRows.map((r) => [r.slug, {
      id: r.id, slug: r.slug, name: r.name, strategy: r.strategy, environments: r.environments, timeoutMs: r.timeoutMs,
      maxRetries: r.maxRetries, targets: r.targets, rules: r.rules, failover: fullFailover(r.failover), batchMode: r.batchMode,
    }])),
    prices: priceRows.map((p) => ({ model: p.model, provider: p.provider, inputPerMillion: p.inputPerMillion, outputPerMillion: p.outputPerMillion, cachedInputPerMillion: p.cachedInputPerMillion, unit: p.unit })),
    modelAllowlist: settingsRows[0]?.modelAllowlist ?? [],
    promptLoggingEnabled: settingsRows[0]?.promptLoggingEnabled ?? false,
    billingDayOfMonth: settingsRows[0]?.billingDayOfMonth ?? 1,
    unpricedBudgetPolicy: settingsRows[0]?.unpricedBudgetPolicy ?? 'block',
    hardCap: settingsRows[0]?.hardCap ?? null,
    memberBudgets: new Map(budgetRows.filter((b) => b.spendLimit).map((b) => [b.memberId, b.spendLimit!])),
    plan: orgRows[0]?.plan ?? 'trial',
    responseCache: settingsRows[0]?.responseCache ?? DEFAULT_RESPONSE_CACHE,
  };
}

export type OrgConfigCache = { get(orgId: string): Promise<OrgConfig>; clear(): void; clearOrg(orgId: string): void };

/**
 * Each organization's routing configuration, read once and kept in process: the hot path
 * reads no Postgres while warm. Any management write clears it (over Redis pub/sub); the TTL
 * only bounds how long a missed message could keep stale config.
 */
export function createOrgConfigCache(db: Database, sealer: Sealer, options: {
  ttlMs?: number;
  max?: number;
  /** Shown each configuration as it loads, before any request reads it (the metrics learn model-map names). */
  onLoad?: (config: OrgConfig) => void;
} = {}): OrgConfigCache {
  const cache = boundedCache<string, Promise<OrgConfig>>(options.max ?? 10_000, { ttl: options.ttlMs ?? 60_000 });
  const { onLoad } = options;
  const load = onLoad ? (orgId: string) => loadOrgConfig(db, sealer, orgId).then((config) => (onLoad(config), config)) : (orgId: string) => loadOrgConfig(db, sealer, orgId);
  let generation = 0;
  return {
    get(orgId) {
      const cached = cache.get(orgId);
      if (cached) return cached;
      const started = generation;
      const loading = load(orgId);
      cache.set(orgId, loading);
      // A failed load is not remembered, nor one a change overtook while it loaded.
      const forget = () => {
        if (cache.get(orgId) === loading) cache.delete(orgId);
      };
      loading.then(() => {
        if (generation !== started) forget();
      }, forget);
      return loading;
    },
    clear() {
      generation += 1;
      cache.clear();
    },
    clearOrg(orgId) {
      generation += 1;
      cache.delete(orgId);
    },
  };
}
