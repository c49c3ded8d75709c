import { endRequestFromRow } from '../../core/observability/attempt-spans';
import { traceEvent } from '../../core/observability/tracing';
import type { RequestLogEntry } from '../../core/request-log/writer';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import { roundDollars } from '../../core/spend/money';
import type { CostEstimate } from '../../core/pricing/cost';
import type { WindowCount } from '../../core/ratelimit/fixed-window';
import { KEY_RATE_WINDOW_MS, keyRateWindowKey, rateLimitHeaders } from '../../core/ratelimit/key-rate';
import { endUserBudgetFields } from '../../core/spend/end-user-caps';
import { CHAT_HOLD_LEASE_MS, CHAT_HOLD_RENEW_MS, type Hold } from '../../core/spend/ledger';
import { anyBlocking, spendScopes, type EndUserCap } from '../../core/spend/scopes';
import { billedModel } from '../../core/routing/candidates';
import type { OrgConfig } from '../../core/routing/org-config';
import type { GatewayContext } from '../context';
import { refuseOverRate } from '../middleware/key-rate-limit';
import type { Attribution } from './chat-request';
import type { GatewayServices } from './services';

/**
 * The spend of one synchronous request (chat, images, audio; spec 8): reserved before any
 * provider is called, settled or released exactly once when the request ends.
 */
export type SpendCall = {
  ctx: GatewayContext;
  services: GatewayServices;
  key: KeyContext;
  config: OrgConfig;
  attribution: Pick<Attribution, 'userId'>;
  createdAt: Date;
  /** The spend held for this request; settled or released once, when it ends. */
  hold: Hold | null;
  /** Keeps a long request's hold alive past its lease; stopped when the spend ends. */
  holdRenewal?: NodeJS.Timeout;
  /** Ends this call's count in flight (GatewayServices.inFlight), once its spend has ended. */
  endInFlight?: () => void;
  /** Closes the call's pending ledger row (owePending: a call no lease covers), once its spend has ended. */
  closePending?: () => void;
  /**
   * The id of this call's hold, ledger row and request-log row when a request makes more than
   * one model call (a decision's retry); the request id otherwise.
   */
  callId?: string;
  /** The provider kind and model that served the call (billedModel: before a deployment map), once known: the ledger row records them (commitments match on them). */
  servedBy?: { provider: string; model: string };
  /**
   * What calls sent and then cut before they answered cost (their prompt, estimated): the
   * provider bills them, so they settle with the request's own cost (issue 33).
   */
  cut?: { cost: number; source: NonNullable<CostEstimate>['source'] };
};

/** A cut call's estimate joins the request's cut cost (ExecuteDeps.onCut). */
export function addCutCost(call: SpendCall, candidate: { connection: { kind: string }; modelId: string }, estimate: CostEstimate): void {
  call.servedBy ??= { provider: candidate.connection.kind, model: billedModel(candidate) };
  if (!estimate) return;
  call.cut = { cost: roundDollars((call.cut?.cost ?? 0) + estimate.cost), source: estimate.source };
}

/** What a request is charged: its answer's estimate and what its cut calls cost, together. */
export function chargedEstimate(call: SpendCall, estimate: CostEstimate): CostEstimate {
  if (!call.cut) return estimate;
  return { cost: roundDollars((estimate?.cost ?? 0) + call.cut.cost), source: estimate?.source ?? call.cut.source };
}

/**
 * A request-log row of a synchronous request (spec 4.1): who asked (the request id, the key's
 * organization, key and project, the end customer, session and tags, and when it was received)
 * followed by what the endpoint served. One literal with the endpoint's fields spread last: V8
 * makes an object that begins with a spread and then gains properties the slow way, about a
 * microsecond a property (docs/decisions.md, "no object begins with a spread").
 */
/** Records a request's row, and first tells the request's trace, when traced, what the request came to. */
export function recordRequestRow(call: SpendCall, row: RequestLogEntry): void {
  const trace = call.ctx.state.trace;
  if (trace?.recording) endRequestFromRow(trace, row);
  call.services.requestLog.record(row);
}

export function requestLogRow<Fields extends object>(call: SpendCall & { attribution: Attribution }, served: Fields) {
  const { key, attribution } = call;
  return {
    id: call.callId ?? call.ctx.state.requestId, orgId: key.orgId, keyId: key.keyId, projectId: key.projectId,
    userId: attribution.userId, sessionId: attribution.sessionId, tags: attribution.tags, createdAt: call.createdAt,
    traceId: call.ctx.state.traceId ?? null,
    // A batch item's row names its batch (issue 56).
    batchId: call.ctx.state.batchId ?? null,
    ...served,
  };
}

/**
 * Before anything is sent, `worstCase()` (the most the request can cost over every candidate
 * it may reach; it throws `unpriced_model_under_budget` where it must) is held in every
 * blocking scope at once, or the request is 402 with that scope's code. Without a blocking
 * scope nothing is held (an amount of 0), but the same step still makes sure every scope's
 * counter exists, rebuilt from the ledger if need be: the settle after the answer is then one
 * Redis step ahead of any later read, so `GET /v1/key` reads its own writes for a key without
 * a limit as for one with. When the rate middleware has not counted the key's request yet
 * (chat), the count rides in the same Redis step (spec 8 headers on every answer).
 */
export async function reserveSpend(call: SpendCall, worstCase: () => number, first?: { connection: { kind: string }; modelId: string }): Promise<void> {
  const { key, config, services, ctx } = call;
  // Until one serves, the ledger row (a lapse's) names the first candidate: commitments match on it.
  if (first) call.servedBy ??= { provider: first.connection.kind, model: billedModel(first) };
  let window: WindowCount | null = null;
  const counted = (w: WindowCount) => {
    window = w;
    ctx.state.rateCounted = true;
    ctx.set(rateLimitHeaders(key, w, Date.now()));
  };
  const scopes = spendScopes(key, config, await endUserCapsOf(call), call.createdAt);
  const blocking = anyBlocking(scopes);
  const holdId = call.callId ?? ctx.state.requestId;
  // What the ledger records if this process dies before the call ends: the hold at its amount.
  const lapseRow = blocking ? ledgerRowOf(call, holdId, endUserScopeOf(scopes)) : undefined;
  const input = { holdId, scopes, amount: blocking ? worstCase() : 0, leaseMs: CHAT_HOLD_LEASE_MS, now: call.createdAt, lapseRow, leasable: true };
  const rate = { key: keyRateWindowKey(key), windowMs: KEY_RATE_WINDOW_MS, limit: key.rateLimitRpm };
  // Counted already (by the rate middleware, on a path that does not count itself): never twice.
  call.hold = ctx.state.rateCounted === true ? await services.spend.reserve(input) : await services.spend.reserveCounted({ rate, counted, ...input });
  if (!call.hold) refuseOverRate(key, window!);
  const trace = ctx.state.trace;
  if (trace?.recording) traceEvent(trace, 'gw.spend.hold', { 'gw.spend.hold_usd': input.amount, 'gw.spend.blocking': blocking });
  // From here the call is in flight until its spend ends: a graceful stop waits for it.
  call.endInFlight = services.inFlight.begin();
  const hold = call.hold!;
  // A blocking key's draw from this process's lease lapses with the lease within seconds; any
  // other call is owed from the journal if this process dies first (a registered hold would
  // lapse only after its 15-minute lease; a key without a blocking limit holds nothing).
  if (!(blocking && hold.lease)) owePending(call, hold, blocking ? () => hold.amount : worstCase);
  // A hold drawn from the process's lease lives as long as the process steps its lease.
  if (!blocking || hold.lease) return;
  call.holdRenewal = setInterval(() => void services.spend.renew(hold, CHAT_HOLD_LEASE_MS, new Date()).catch(() => undefined), CHAT_HOLD_RENEW_MS);
  call.holdRenewal.unref();
}

/**
 * If this process dies before the call ends, its worst case is owed: it is kept as a pending
 * ledger row (BatchWriter.pending), closed when the call's spend ends, and inserted by the next
 * process to start here (issue 54's soak). The row has the id the call's settle writes, and a
 * registered hold's lapse too, so only one of them is ever kept. A call no price covers
 * (unpriced, allowed without a limit) owes none.
 */
function owePending(call: SpendCall, hold: Hold, worstCase: () => number): void {
  let amount = 0;
  try {
    amount = worstCase();
  } catch {
    return;
  }
  if (!(amount > 0)) return;
  const row = ledgerRowOf(call, call.callId ?? call.ctx.state.requestId, endUserScopeOf(hold.scopes));
  if (hold.rowId) row.id = hold.rowId;
  else hold.rowId = row.id;
  call.closePending = call.services.spendRows.pending(Object.assign(row, { amount, state: 'settled' as const }));
}

/** The end-customer counter a hold settles into first (its governing rule's), as the ledger row records it. */
function endUserScopeOf(scopes: Hold['scopes']): string | null {
  const scope = scopes.find((s) => s.kind === 'end_user');
  return scope ? scope.scope.slice('end_user:'.length) : null;
}

/** A call's ledger row, without its amount and state: written when it settles, or when its hold lapses. */
function ledgerRowOf(call: SpendCall, requestId: string, endUserScope: string | null) {
  const { key } = call;
  return {
    id: newId('spend'), orgId: key.orgId, lineageId: key.lineageId, projectId: key.projectId, memberId: key.createdByMemberId,
    endUserId: call.attribution.userId, endUserScope, requestId, createdAt: call.createdAt, updatedAt: call.createdAt,
    provider: call.servedBy?.provider ?? null, model: call.servedBy?.model ?? null,
  };
}

/**
 * The end customer's caps (spec 2.6 cap rules) for `metadata.user_id`: the governing rule's
 * (the project's, else the organization's) and, under a project rule, the organization's too.
 * A rule with `missing_id: refuse` makes the id required (400 `end_user_id_required`); without
 * an id and with `serve`, the request is not capped per customer.
 */
async function endUserCapsOf(call: SpendCall): Promise<EndUserCap[]> {
  const cap = await call.services.endUserCap(call.config, { projectId: call.key.projectId, endUserId: call.attribution.userId });
  if (!cap) return [];
  const endUserId = cap.endUserId;
  if (!endUserId) {
    if (cap.missingId === 'refuse') throw new GatewayError('end_user_id_required', 'This project caps spend per end customer: name one in `metadata.user_id`.');
    return [];
  }
  const { createdAt, config } = call;
  return [cap, ...(cap.within ? [cap.within] : [])].map((rule) => ({
    endUserId, ruleId: rule.ruleId, organizationWide: rule.scope === 'organization', amount: rule.amount, period: rule.period, behavior: rule.behavior,
    refusalDetails: { ...endUserBudgetFields(rule, endUserId, createdAt, config.billingDayOfMonth) },
  }));
}

/**
 * The request's spend ends once: its cost (with what its cut calls cost) replaces the hold in
 * every scope and goes to the ledger; with no cost known (an error before anything was sent, an
 * unpriced answer) the hold is released.
 */
export function endSpend(call: SpendCall, estimate: CostEstimate): void {
  const hold = call.hold;
  if (!hold) return;
  call.hold = null;
  clearInterval(call.holdRenewal);
  const cost = chargedEstimate(call, estimate)?.cost ?? 0;
  const done = cost > 0
    ? call.services.spend.settle(hold, cost, ledgerRowOf(call, call.callId ?? call.ctx.state.requestId, endUserScopeOf(hold.scopes)))
    : call.services.spend.release(hold);
  // The settled row (same id) is journaled by now, or nothing was owed.
  const closePending = call.closePending;
  call.closePending = undefined;
  if (closePending) void done.catch(() => undefined).finally(closePending);
  // Off the answer's path; a hold that could not be ended lapses with its lease. The call stays
  // in flight until then, and a turn longer, for the row its caller logs right after this.
  const endInFlight = call.endInFlight;
  void done.catch(() => undefined).finally(() => setImmediate(() => endInFlight?.()));
}
