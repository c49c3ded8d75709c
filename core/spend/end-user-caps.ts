import { and, eq } from 'drizzle-orm';
import { boundedCache } from '../bounded-cache';
import { decimalToNanos, toDollars } from './money';
import { nextReset, periodStart } from './periods';
import type { Executor } from '../db/client';
import {
  endUserCapOverrides,
  endUserCapRules,
  type EndUserCapBehavior,
  type EndUserCapPeriod,
  type EndUserMissingId,
} from '../db/schema';
import { GatewayError } from '../errors';
import type { OrgConfig, OrgConfigCache } from '../routing/org-config';

/**
 * End-customer caps (spec 2.6, issue 10): which cap applies to one request's end customer
 * (`metadata.user_id`). The spend reservation (core/spend) calls `resolveEndUserCap` and counts
 * the customer's spend under the answer's `ruleId`; this file never counts spend itself.
 *
 * Warm path, no Postgres: the organization's rules are read once per OrgConfig snapshot, and each
 * customer's override, or the absence of one, is kept in an in-process LRU whose entries belong to
 * the snapshot they were read under. A config change (any management write, override writes
 * included) replaces the organization's snapshot, so everything read under the old one is ignored
 * from then on; the TTLs (60 s config, 30 s override) only bound a missed message.
 */

/** A rule as the hot path keeps it, from the organization's cached config. */
export type EndUserCapRuleConfig = {
  id: string;
  projectId: string | null;
  /** Decimal dollars per period, or null: no default cap. */
  amount: string | null;
  period: EndUserCapPeriod;
  behavior: EndUserCapBehavior;
  missingId: EndUserMissingId;
  enabled: boolean;
};

/** Which rule a cap came from, as the 402 names it: `organization` or `project:<id>`. */
export type EndUserCapScope = 'organization' | `project:${string}`;

/** One rule's cap for one end customer. */
export type EndUserRuleCap = {
  /** The rule; spend of one customer is counted per rule and period. */
  ruleId: string;
  scope: EndUserCapScope;
  /** Dollars per period for this customer (the rule's own override, else its default); null: no cap. */
  amount: number | null;
  /** The same amount in exact integer nano-dollars (amounts reach $1,000,000,000). */
  amountNanos: bigint | null;
  period: EndUserCapPeriod;
  behavior: EndUserCapBehavior;
};

/** The caps that apply to one request's end customer. */
export type EndUserCap = EndUserRuleCap & {
  /** What to do when the request names no customer: serve it uncapped, or refuse it (400 end_user_id_required). */
  missingId: EndUserMissingId;
  /** The customer the amount is for; null when the request named none. */
  endUserId: string | null;
  /**
   * Under a project's rule, the organization's rule when it is enabled too: a project rule
   * narrows, never widens, so the customer's spend counts against both and the smaller
   * remaining room applies. Null under the organization rule itself.
   */
  within: EndUserRuleCap | null;
};

/** Largest amount a rule or an override may carry, in dollars (the spec's bound on credit amounts). */
export const MAX_END_USER_CAP_DOLLARS = 1_000_000_000;
/** `metadata.user_id` values are at most this long; longer ones cannot have an override. */
export const MAX_END_USER_ID_LENGTH = 256;

const DECIMAL_DOLLARS = /^\d+(\.\d{1,9})?$/;
const NANOS = 1_000_000_000n;

/** Whether a string is a decimal dollar amount of at most 9 decimals. */
export function isDecimalDollars(text: string): boolean {
  return DECIMAL_DOLLARS.test(text);
}

/** Exact nano-dollars of a decimal dollar string (`"12.5"` is 12,500,000,000); anything else throws. */
export function decimalDollarsToNanos(text: string): bigint {
  if (!DECIMAL_DOLLARS.test(text)) throw new Error(`not a decimal dollar amount: ${text}`);
  return decimalToNanos(text);
}

/** The canonical form of a decimal dollar string: no leading zeros, no trailing fractional zeros. */
export function normalizeDecimalDollars(text: string): string {
  const nanos = decimalDollarsToNanos(text);
  const whole = (nanos / NANOS).toString();
  const fraction = (nanos % NANOS).toString().padStart(9, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}

/** The rules of one organization, enabled or not. */
export async function loadEndUserCapRules(db: Executor, orgId: string): Promise<EndUserCapRuleConfig[]> {
  const rows = await db.select().from(endUserCapRules).where(eq(endUserCapRules.orgId, orgId));
  return rows.map((r) => ({
    id: r.id,
    projectId: r.projectId,
    amount: r.amount,
    period: r.period,
    behavior: r.behavior,
    missingId: r.missingId,
    enabled: r.enabled,
  }));
}

/** How long one override (or its absence) is trusted without a config-change message. */
export const OVERRIDE_TTL_MS = 30_000;

/**
 * What is cached under one OrgConfig snapshot: the organization's rules, read once. The
 * snapshot (the object `orgConfig.get` answers) is replaced whenever a config change of the
 * organization arrives over Redis (api/runtime.ts) or its TTL ends, so keying by it gives these
 * caches the same invalidation without a subscription of their own.
 */
type Snapshot = { rules: Promise<EndUserCapRuleConfig[]> };
const snapshots = new WeakMap<object, Snapshot>();

type CachedOverride = { snapshot: Snapshot; amount: Promise<string | null> };

/**
 * Overrides by organization, rule and customer, and the absence of one (most customers have
 * none). One LRU per process bounds memory whatever the number of organizations; an entry counts
 * only under the snapshot it was read with.
 */
const overrides = boundedCache<string, CachedOverride>(100_000, { ttl: OVERRIDE_TTL_MS });

function snapshotOf(db: Executor, config: Pick<OrgConfig, 'orgId'>): Snapshot {
  let snapshot = snapshots.get(config);
  if (!snapshot) {
    const rules = loadEndUserCapRules(db, config.orgId);
    const created: Snapshot = { rules };
    snapshot = created;
    snapshots.set(config, created);
    // A failed read is not remembered.
    rules.catch(() => {
      if (snapshots.get(config) === created) snapshots.delete(config);
    });
  }
  return snapshot;
}

function overrideAmount(db: Executor, orgId: string, snapshot: Snapshot, ruleId: string, endUserId: string): Promise<string | null> {
  if (endUserId.length > MAX_END_USER_ID_LENGTH) return Promise.resolve(null);
  const key = `${orgId}\u0000${ruleId}\u0000${endUserId}`;
  const cached = overrides.get(key);
  if (cached && cached.snapshot === snapshot) return cached.amount;
  const amount = db
    .select({ amount: endUserCapOverrides.amount })
    .from(endUserCapOverrides)
    .where(and(eq(endUserCapOverrides.ruleId, ruleId), eq(endUserCapOverrides.endUserId, endUserId)))
    .then(([row]) => row?.amount ?? null);
  const entry: CachedOverride = { snapshot, amount };
  overrides.set(key, entry);
  amount.catch(() => {
    if (overrides.get(key) === entry) overrides.delete(key);
  });
  return amount;
}

function scopeOf(rule: EndUserCapRuleConfig): EndUserCapScope {
  return rule.projectId === null ? 'organization' : `project:${rule.projectId}`;
}

export type EndUserCapRequest = {
  projectId: string | null;
  /** The request's `metadata.user_id`; absent, null or empty means the request named no customer. */
  endUserId?: string | null;
};

/**
 * The caps for one request, under the organization's config snapshot already in hand (the chat
 * path has it); the snapshot is only the cache's identity, its fields are not read.
 *
 * - No enabled rule for the organization or the key's project: null.
 * - A project's enabled rule governs that project's keys (its period, behavior and overrides),
 *   and the organization's enabled rule stays in force beside it (`within`): the customer's
 *   spend counts against both, each in its own period, so the smaller remaining room of the two
 *   applies and a project rule never widens the organization's. The organization rule alone
 *   covers every other project.
 * - An override replaces the default amount of its own rule only.
 * - A request without a customer is refused when either rule says `missing_id: refuse`.
 */
export async function resolveEndUserCapIn(
  db: Executor,
  config: Pick<OrgConfig, 'orgId'>,
  request: EndUserCapRequest,
): Promise<EndUserCap | null> {
  const snapshot = snapshotOf(db, config);
  const rules = await snapshot.rules;
  const orgRule = rules.find((r) => r.enabled && r.projectId === null);
  const projectRule = request.projectId === null ? undefined : rules.find((r) => r.enabled && r.projectId === request.projectId);
  const rule = projectRule ?? orgRule;
  if (!rule) return null;
  const endUserId = request.endUserId ? request.endUserId : null;

  const capOf = async (r: EndUserCapRuleConfig): Promise<EndUserRuleCap> => {
    const own = endUserId === null ? null : await overrideAmount(db, config.orgId, snapshot, r.id, endUserId);
    const text = own ?? r.amount;
    const nanos = text === null ? null : decimalDollarsToNanos(text);
    return { ruleId: r.id, scope: scopeOf(r), amount: nanos === null ? null : toDollars(nanos), amountNanos: nanos, period: r.period, behavior: r.behavior };
  };

  const within = projectRule && orgRule ? await capOf(orgRule) : null;
  const refuses = rule.missingId === 'refuse' || (within !== null && orgRule!.missingId === 'refuse');
  return { missingId: refuses ? 'refuse' : 'serve', endUserId, within, ...(await capOf(rule)) };
}

/**
 * The cap for one request: organization, the gateway key's project, and `metadata.user_id`.
 * Reads the organization's cached config; Postgres only when cold.
 */
export async function resolveEndUserCap(
  deps: { db: Executor; orgConfig: Pick<OrgConfigCache, 'get'> },
  request: EndUserCapRequest & { orgId: string },
): Promise<EndUserCap | null> {
  const config = await deps.orgConfig.get(request.orgId);
  return resolveEndUserCapIn(deps.db, config, request);
}

/** When a cap's current period ends: daily at midnight UTC, weekly on Monday, monthly on the billing day. */
export function endUserCapResetsAt(period: EndUserCapPeriod, now: Date, billingDayOfMonth: number): Date {
  return nextReset(period, periodStart(period, now, billingDayOfMonth), billingDayOfMonth);
}

/** The extra fields of the `end_user_budget` 402 (spec 7). */
export type EndUserBudgetFields = { scope: EndUserCapScope; end_user_id: string; period: EndUserCapPeriod; resets_at: string };

export function endUserBudgetFields(cap: Pick<EndUserCap, 'scope' | 'period'>, endUserId: string, now: Date, billingDayOfMonth: number): EndUserBudgetFields {
  return {
    scope: cap.scope,
    end_user_id: endUserId,
    period: cap.period,
    resets_at: endUserCapResetsAt(cap.period, now, billingDayOfMonth).toISOString(),
  };
}

/** 402 `end_user_budget`: the customer's cap has no room for this request. */
export function endUserBudgetError(cap: Pick<EndUserCap, 'scope' | 'period'>, endUserId: string, now: Date, billingDayOfMonth: number): GatewayError {
  const fields = endUserBudgetFields(cap, endUserId, now, billingDayOfMonth);
  return new GatewayError('end_user_budget', `The ${cap.period} spend cap of end customer \`${endUserId}\` is used up; it resets at ${fields.resets_at}.`, { details: fields });
}

/** 400 `end_user_id_required`: the rule refuses requests that name no customer. */
export function endUserIdRequiredError(): GatewayError {
  return new GatewayError('end_user_id_required', 'This request must name its end customer in `metadata.user_id`: an end-customer cap rule refuses requests without one.');
}
