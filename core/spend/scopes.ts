import type { KeyContext } from '../auth/gateway-key-auth';
import { nextReset, periodStart } from './periods';
import type { ErrorKind } from '../errors';
import type { OrgConfig } from '../routing/org-config';
import type { ScopeWindow } from './holds';
import { toNanos } from './money';

export type BudgetPeriod = 'daily' | 'weekly' | 'monthly' | 'never';
export type ScopeKind = 'key' | 'project' | 'member' | 'organization' | 'end_user';

/** What a request's spend counts against (spec 8): each scope's limit in its current window. */
export type SpendScope = ScopeWindow & {
  kind: ScopeKind;
  /** The 402 code when this scope has no room. */
  code: ErrorKind;
  limit: number | null;
  blocking: boolean;
  period: BudgetPeriod;
  windowStart: Date;
  resetsAt: Date | null;
  /** The ledger column and value that rebuild this scope's counter. */
  ledger: { column: 'lineage_id' | 'project_id' | 'member_id' | 'org_id' | 'end_user_scope' | 'end_user_id'; value: string };
  /** Fractions of the limit whose first crossing in a window is recorded (spec 2.6 `alert_at`). */
  alertAt: number[];
  behavior: 'block' | 'alert';
  /** Fields the 402 carries beside message, type and code (`end_user_budget`, spec 7). */
  refusalDetails?: Record<string, unknown>;
};

/** A window's counters outlive it by this long, so a late settle still finds them. */
const KEEP_AFTER_WINDOW_SECONDS = 40 * 86_400;


export type ScopeInput = {
  kind: ScopeKind; id: string; code: ErrorKind; limit: number | null; blocking: boolean; period: BudgetPeriod;
  ledger: SpendScope['ledger']; alertAt?: number[];
  /** When the limit's period last changed (a key's `credit_period_since`): a new window id from then. */
  periodSince?: Date | null;
};

/**
 * A window's id (its Redis counters' name, its ledger rows' `hold_windows`, its crossings'): the
 * day it began (`2026-11-23`, `lifetime`). Once the scope's period has changed, also the period
 * and when it changed (`weekly:2026-11-23~<base-36 ms>`), so the scope never reads a counter
 * another period left: Monday's daily window and the week's begin on the same day, and a period
 * changed and changed back within one window would find its old counter. A new id is rebuilt
 * from the Postgres ledger, which has every settled amount. A scope whose period never changed
 * keeps the id it always had: renaming every window at a deploy would rebuild each counter while
 * the old processes still settle into the old ones, and running jobs' holds stay under the ids
 * they were held in.
 */
export function windowId(period: BudgetPeriod, windowStart: Date, periodSince?: Date | null): string {
  const day = period === 'never' ? 'lifetime' : windowStart.toISOString().slice(0, 10);
  return periodSince ? `${period}:${day}~${periodSince.getTime().toString(36)}` : day;
}

/** The day a window began, as its id says it (`YYYY-MM-DD`), or null for a lifetime window. */
export function windowStartDay(window: string): string | null {
  return /\d{4}-\d{2}-\d{2}/.exec(window)?.[0] ?? null;
}

/** One scope's current window for a limit (also read by `GET /manage/v1/budget_status`). */
export function scopeAt(orgId: string, input: ScopeInput, now: Date, billingDay: number): SpendScope {
  const lifetime = input.period === 'never';
  const windowStart = lifetime ? new Date(0) : periodStart(input.period, now, billingDay);
  const resetsAt = lifetime ? null : nextReset(input.period as Exclude<BudgetPeriod, 'never'>, windowStart, billingDay);
  return {
    orgId,
    scope: `${input.kind}:${input.id}`,
    window: windowId(input.period, windowStart, input.periodSince),
    limitNanos: input.blocking && input.limit !== null ? toNanos(input.limit) : null,
    ttlSeconds: resetsAt ? Math.ceil((resetsAt.getTime() - now.getTime()) / 1000) + KEEP_AFTER_WINDOW_SECONDS : 0,
    kind: input.kind,
    code: input.code,
    limit: input.limit,
    blocking: input.blocking && input.limit !== null,
    period: input.period,
    windowStart,
    resetsAt,
    ledger: input.ledger,
    alertAt: input.alertAt ?? [],
    behavior: input.blocking ? 'block' : 'alert',
  };
}

/** One end-customer cap rule as the request meets it. */
export type EndUserCap = {
  endUserId: string;
  /** The rule the cap comes from: a customer's spend is counted per rule and period. */
  ruleId: string;
  /** Whether the rule is the organization's (it counts the customer's spend in every project) or a project's. */
  organizationWide: boolean;
  amount: number | null;
  period: Exclude<BudgetPeriod, 'never'>;
  behavior: 'block' | 'alert';
  refusalDetails: Record<string, unknown>;
};

/** An end customer's cap is crossed once it is reached (end-customer cap rules set no `alert_at`). */
const END_USER_CAP_ALERT_AT = [1];

/**
 * An end customer's window under one cap rule (also read by `GET /manage/v1/budget_status`).
 * The counter is per rule and customer; rebuilt from the ledger, a project rule's counter sums
 * that rule's rows (`end_user_scope`), the organization rule's every row of the customer in the
 * organization (`end_user_id`), since it caps their spend in every project.
 */
export function endUserCapScope(orgId: string, cap: Omit<EndUserCap, 'refusalDetails'>, now: Date, billingDay: number): SpendScope {
  const scope = endUserScopeOf(cap);
  const ledger: SpendScope['ledger'] = cap.organizationWide ? { column: 'end_user_id', value: cap.endUserId } : { column: 'end_user_scope', value: scope };
  // Reaching the cap is recorded as a crossing: a finding about the customer (budget.threshold_crossed),
  // which notification rules with `include_end_user` pass on.
  return scopeAt(orgId, { kind: 'end_user', id: scope, code: 'end_user_budget', limit: cap.amount, blocking: cap.behavior === 'block', period: cap.period, ledger, alertAt: END_USER_CAP_ALERT_AT }, now, billingDay);
}

/**
 * Every scope a request of this key counts against, now: the key lineage (always counted; its
 * `credit_limit` blocks), the project's `spend_limit`, the creating member's budget, the
 * organization's `hard_cap`, and the end customer under each cap rule that applies (the
 * project's first, then the organization's). `behavior: alert` scopes are counted and never refuse.
 */
export function spendScopes(key: KeyContext, config: Pick<OrgConfig, 'hardCap' | 'memberBudgets' | 'billingDayOfMonth'>, endUserCaps: readonly EndUserCap[], now: Date): SpendScope[] {
  const day = config.billingDayOfMonth;
  const scopes: SpendScope[] = [];
  const credit = key.creditLimit;
  scopes.push(scopeAt(key.orgId, {
    kind: 'key', id: key.lineageId, code: credit?.period === 'never' ? 'key_lifetime_limit' : 'key_budget',
    limit: credit?.amount ?? null, blocking: credit !== null, period: credit?.period ?? 'never', ledger: { column: 'lineage_id', value: key.lineageId },
    periodSince: key.creditPeriodSince,
  }, now, day));
  const project = key.projectSpendLimit;
  if (project) {
    scopes.push(scopeAt(key.orgId, { kind: 'project', id: key.projectId, code: 'project_budget', limit: project.monthly, blocking: project.behavior === 'block', period: 'monthly', ledger: { column: 'project_id', value: key.projectId }, alertAt: project.alert_at }, now, day));
  }
  const member = key.createdByMemberId ? config.memberBudgets.get(key.createdByMemberId) : undefined;
  if (member && key.createdByMemberId) {
    scopes.push(scopeAt(key.orgId, { kind: 'member', id: key.createdByMemberId, code: 'member_budget', limit: member.monthly, blocking: member.behavior === 'block', period: 'monthly', ledger: { column: 'member_id', value: key.createdByMemberId }, alertAt: member.alert_at }, now, day));
  }
  if (config.hardCap) {
    scopes.push(scopeAt(key.orgId, { kind: 'organization', id: key.orgId, code: 'organization_budget', limit: config.hardCap.monthly, blocking: config.hardCap.behavior === 'block', period: 'monthly', ledger: { column: 'org_id', value: key.orgId }, alertAt: config.hardCap.alert_at }, now, day));
  }
  for (const cap of endUserCaps) scopes.push({ refusalDetails: cap.refusalDetails, ...endUserCapScope(key.orgId, cap, now, day) });
  return scopes;
}

/** The ledger's `end_user_scope` of a customer under a cap rule. */
export function endUserScopeOf(cap: Pick<EndUserCap, 'ruleId' | 'endUserId'>): string {
  return `${cap.ruleId}:${cap.endUserId}`;
}

/** Whether any scope can refuse: then the worst case is reserved and output is capped. */
export function anyBlocking(scopes: SpendScope[]): boolean {
  return scopes.some((s) => s.blocking);
}
