import { eq } from 'drizzle-orm';
import { boundedCache } from '../bounded-cache';
import type { Database } from '../db/client';
import { gatewayKeys, organizations, projects, type CreditLimit, type EntitlementState, type SpendLimit } from '../db/schema';
import { GatewayError } from '../errors';
import { addressAllowed, parseRanges, type CidrRange } from './ip-allowlist';
import { createSingleFlight } from '../single-flight';

/** What the hot path needs to know about a key, loaded once and cached in-process. */
export type KeyContext = {
  keyId: string;
  orgId: string;
  projectId: string;
  lineageId: string;
  label: string;
  rateLimitRpm: number;
  environment: string | null;
  modelAllowlist: string[];
  /** The owning project's allowlist; empty allows every model. */
  projectModelAllowlist: string[];
  allowedRoutes: string[];
  allowedProviders: string[];
  creditLimit: CreditLimit | null;
  /** When the credit limit's period last changed: part of the key scope's window id. */
  creditPeriodSince: Date | null;
  /** The member who created the key: their budget counts its spend. */
  createdByMemberId: string | null;
  /** The owning project's spend limit. */
  projectSpendLimit: SpendLimit | null;
  /** Which jobs and request history the key may read: its own lineage, or the organization (key-reach.ts). */
  observabilityAccess: 'none' | 'scoped' | 'organization';
  disabled: boolean;
  revoked: boolean;
  expiresAt: Date | null;
  projectArchived: boolean;
  entitlementState: EntitlementState;
  supportEmail: string | null;
  allowedRanges: CidrRange[];
};

export async function loadKeyContext(db: Database, secretHash: string): Promise<KeyContext | null> {
  const rows = await db
    .select({ key: gatewayKeys, archivedAt: projects.archivedAt, projectModelAllowlist: projects.modelAllowlist, projectSpendLimit: projects.spendLimit, org: organizations })
    .from(gatewayKeys)
    .innerJoin(projects, eq(projects.id, gatewayKeys.projectId))
    .innerJoin(organizations, eq(organizations.id, gatewayKeys.orgId))
    .where(eq(gatewayKeys.secretHash, secretHash))
    .limit(1);
  const row = rows[0];
  if (!row) return null;
  const { key, org } = row;
  return {
    keyId: key.id,
    orgId: key.orgId,
    projectId: key.projectId,
    lineageId: key.lineageId,
    label: key.label,
    rateLimitRpm: key.rateLimitRpm,
    environment: key.environment,
    modelAllowlist: key.modelAllowlist,
    projectModelAllowlist: row.projectModelAllowlist,
    allowedRoutes: key.allowedRoutes,
    allowedProviders: key.allowedProviders,
    observabilityAccess: key.observabilityAccess,
    creditLimit: key.creditLimit,
    creditPeriodSince: key.creditPeriodSince,
    createdByMemberId: key.createdByMemberId,
    projectSpendLimit: row.projectSpendLimit,
    disabled: key.disabled,
    revoked: key.revokedAt !== null,
    expiresAt: key.expiresAt,
    projectArchived: row.archivedAt !== null,
    entitlementState: org.entitlementState,
    supportEmail: org.supportEmail,
    allowedRanges: parseRanges(key.allowedIps),
  };
}

/**
 * Why a found key may not be used right now, in the order a user would want to hear it:
 * dead keys are 401, the organization's standing next, then the key's own restrictions.
 */
export function refuseKey(key: KeyContext, now: Date, clientAddress: string | null): GatewayError | null {
  if (key.revoked) return new GatewayError('authentication', 'This API key has been revoked.');
  if (key.expiresAt && key.expiresAt.getTime() <= now.getTime()) {
    return new GatewayError('authentication', 'This API key has expired.');
  }
  switch (key.entitlementState) {
    case 'suspended':
      return new GatewayError('organization_suspended', 'This organization is suspended. Contact support.', {
        details: { support_email: key.supportEmail },
      });
    case 'trial_payment_failed':
      return new GatewayError('trial_payment_failed', 'The trial charge failed and the grace period has ended.');
    case 'lapsed':
      return new GatewayError('subscription_required', 'An active subscription is required.');
    default:
      break;
  }
  if (key.disabled) return new GatewayError('key_disabled', 'This API key is disabled.');
  if (key.projectArchived) return new GatewayError('project_archived', "This API key's project is archived.");
  if (clientAddress !== null && !addressAllowed(key.allowedRanges, clientAddress)) {
    return new GatewayError('ip_not_allowed', 'Requests from this address are not allowed for this API key.');
  }
  return null;
}

export type KeyResolver = {
  resolve(secretHash: string): Promise<KeyContext | null>;
  clear(): void;
  /** Drops the cached keys of one organization. */
  clearOrg(orgId: string): void;
};

/**
 * In-process cache in front of loadKeyContext: a warm request reads no Postgres. Entries live
 * `ttlMs` at most and are dropped at once when a management change is published; unknown
 * hashes are cached too, so a flood of bad keys cannot reach the database.
 */
export function createKeyResolver(db: Database, options: { ttlMs?: number; max?: number } = {}): KeyResolver {
  const cache = boundedCache<string, { value: KeyContext | null }>(options.max ?? 50_000, { ttl: options.ttlMs ?? 30_000 });
  const inflight = createSingleFlight<KeyContext | null>();
  // A load that started before a clear() must not repopulate the cache with what it read.
  let generation = 0;
  return {
    async resolve(secretHash) {
      const hit = cache.get(secretHash);
      if (hit) return hit.value;
      return inflight.run(secretHash, () => {
        const startedIn = generation;
        return loadKeyContext(db, secretHash).then((value) => {
          if (startedIn === generation) cache.set(secretHash, { value });
          return value;
        });
      });
    },
    clear() {
      generation += 1;
      inflight.clear();
      cache.clear();
    },
    clearOrg(orgId) {
      generation += 1;
      inflight.clear();
      for (const [hash, entry] of cache.entries()) if (entry.value?.orgId === orgId) cache.delete(hash);
    },
  };
}
