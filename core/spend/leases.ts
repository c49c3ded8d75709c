import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { RedisHandle } from '../redis';
import { newId } from '../ids';
import { stepLease, type ScopeWindow } from './holds';
import type { BatchWriter } from '../db/batch-writer';
import { countInWindow, type WindowCount as RateCount } from '../ratelimit/fixed-window';
import { averagedDemand, type RateLeases } from '../ratelimit/rate-leases';
import type { Hold, ReserveInput, SpendLedger, SpendLedgerRow, SpendUpkeep } from './ledger';
import { toDollars, toNanos } from './money';
import type { SpendScope } from './scopes';

/**
 * Per-process spend leases (issue 37; docs/decisions.md, "Spend leases"). A lease is a hold in
 * the same Redis windows as a request's hold, taken by this process on one scope set (the
 * windows a request's spend counts in) and kept alive by a step every `LEASE_STEP_MS`. A request
 * draws its worst case from the lease without a Redis call; what it actually cost is settled
 * here and added to the windows' settled totals by the next step, which also resizes the lease.
 * So at every instant a window's settled + held (every lease included) stays within its limit,
 * as it does with per-request holds, and a request is refused only when an exact hold is.
 *
 * Keys with no blocking scope hold nothing: their spend is counted here and added by the step,
 * and their requests make no Redis call for spend.
 */

/** A lease lives this long past its last step: a process that stops stepping loses it then. */
export const LEASE_TTL_MS = 3_000;
/** Spend is flushed and leases resized this often (and on shutdown). */
export const LEASE_STEP_MS = 250;
/** A lease's spare room is about this many seconds of the process's recent demand on its set. */
const LEASE_DEMAND_SECONDS = 1;
/** ...and never more than this share of a blocking window's room left. */
const LEASE_SHARE_OF_ROOM = 0.1;
/**
 * All leases of one window together (every process, every scope set that counts in it) hold at
 * most this share of the room the window would have without them: the most a request can be
 * refused for while room exists. One share per lease alone let a project's 16 leases (8 keys in
 * 2 processes) hold about 60% of its room.
 */
const ALL_LEASES_SHARE_OF_ROOM = 0.25;
/**
 * While a step is in flight (a round trip, longer when the process is busy) requests may draw
 * up to about this many seconds of demand from the room the lease already holds; beyond it they
 * hold exactly. Without it, a busy process held exactly for one request in ten (bench, issue 37).
 */
const FLIGHT_ALLOWANCE_SECONDS = 0.1;
/** After this many requests its lease could not cover since the last step, a scope set steps at once (a burst need not wait for the tick). */
const STEP_NOW_AFTER_MISSES = 8;
/** Where a blocking window has less room left than this many worst cases, no spare room: every request holds exactly. */
const NO_LEASE_UNDER_WORST_CASES = 4;

/** A request's worst case drawn from its scope set's lease, and the lease it was drawn under (a lease swept since covers it). */
export type LeaseDraw = { readonly state: LeaseState; readonly nanos: number; readonly leaseId: string };

/** The ledger row a lease's lapse is recorded with, as a request's would be, less what names the request. */
export type LeaseRowTemplate = Omit<SpendLedgerRow, 'amount' | 'state'>;

type LeaseState = {
  readonly setKey: string;
  readonly windowsKey: string;
  readonly orgId: string;
  readonly scopes: SpendScope[];
  readonly blocking: boolean;
  leaseId: string;
  /** Steps sent so far: a cost settled after step n is flushed by step n + 1, or lapses with step n's lease. */
  generation: number;
  /** Whether Redis holds the lease (room was granted at its last step). */
  held: boolean;
  /** Room this process may draw on: what Redis holds for it, or, while a step is in flight, the floor that step keeps. */
  amount: number;
  /** Worst cases of requests in flight that drew from the lease. */
  drawn: number;
  /** Requests in flight that drew from it (a key without a blocking scope draws nothing, and is still in flight). */
  inFlight: number;
  /** What ended requests cost, not yet added to the windows. */
  unflushed: number;
  /** Those costs one by one, in order, where a scope records `alert_at` crossings (a crossing names the total it reached). */
  costs: number[] | null;
  /** Worst cases asked for since the last step, drawn or not: what sizes the lease. */
  demand: number;
  /** Demand per second, averaged over steps. */
  rate: number;
  /** Requests since the last step that the lease could not cover. */
  misses: number;
  /** The largest worst case asked for since the last step (the previous step's when none). */
  worst: number;
  lastStepAt: number;
  stepping: Promise<void> | null;
  row: LeaseRowTemplate;
  /** The lease ref of the last step that was granted room: what a lapse of the lease is recorded under. */
  registeredRef: string | null;
  /**
   * Leases of this set swept as lapsed while this process lived (a stall past LEASE_TTL_MS), by
   * id, with the ref their lapse was recorded under: settled in full, they cover the requests
   * drawn from them that end later, which are not counted again (issue 54, item 7).
   */
  swept: Map<string, string>;
};

export type SpendLeases = {
  /**
   * Draws a request's worst case from this process's lease on its scopes, or answers null when
   * the lease cannot cover it (the request then holds exactly). Without a blocking scope it
   * always draws (nothing is held).
   */
  draw(scopes: SpendScope[], nanos: number, row: LeaseRowTemplate): LeaseDraw | null;
  /**
   * A drawn request ended: its worst case returns to the lease and its cost is settled here.
   * Answers the lease and step it settled under, for its ledger row (`lease_ref`).
   */
  end(draw: LeaseDraw, costNanos: number): string;
  /** Steps now every lease of the organization (or all): its spend reaches Redis before the answer. */
  flush(orgId?: string): Promise<void>;
  /** Flushes and gives every lease back (shutdown); no lease is taken after. */
  close(): Promise<void>;
};

export type SpendLeaseDeps = { redis: RedisHandle; upkeep: SpendUpkeep; stepMs?: number; now?: () => number };

/** `<lease id>#<step>`: a request row's and a lapse row's `lease_ref`. */
function leaseRefOf(state: Pick<LeaseState, 'leaseId' | 'generation'>): string {
  return `${state.leaseId}#${state.generation}`;
}

/** The windows a scope set counts in, and with `limits` each window's limit: a set whose limits changed counts in the same windows. */
function scopeSetKey(scopes: SpendScope[], limits: boolean): string {
  let key = scopes[0]?.orgId ?? '';
  for (const s of scopes) key += limits ? `|${s.scope}@${s.window}:${s.limitNanos ?? '-'}` : `|${s.scope}@${s.window}`;
  return key;
}

export function createSpendLeases(deps: SpendLeaseDeps): SpendLeases {
  const processId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const now = deps.now ?? Date.now;
  const states = new Map<string, LeaseState>();
  /** The newest state on each set of windows: when a limit changes, the state under the old limit gives its lease back. */
  const newest = new Map<string, LeaseState>();
  const forget = (state: LeaseState) => {
    states.delete(state.setKey);
    if (newest.get(state.windowsKey) === state) newest.delete(state.windowsKey);
  };
  let leases = 0;
  let closed = false;
  const newLeaseId = () => `lease:${processId}:${(leases += 1)}`;

  const timer = setInterval(() => void stepAll(null, false), deps.stepMs ?? LEASE_STEP_MS);
  timer.unref();

  function stateFor(scopes: SpendScope[], row: LeaseRowTemplate): LeaseState {
    const setKey = scopeSetKey(scopes, true);
    let state = states.get(setKey);
    if (!state) {
      const endUserScope = row.endUserScope ?? null;
      const windowsKey = scopeSetKey(scopes, false);
      state = {
        setKey, windowsKey, orgId: scopes[0]!.orgId, scopes, blocking: scopes.some((s) => s.blocking), leaseId: newLeaseId(), generation: 0, held: false, registeredRef: null, swept: new Map(),
        amount: 0, drawn: 0, inFlight: 0, unflushed: 0, costs: scopes.some((s) => s.alertAt.length > 0 && s.limit !== null) ? [] : null, demand: 0, rate: 0, misses: 0, worst: 0, lastStepAt: now(), stepping: null,
        // A lapse is recorded in the lease's windows: the customer only where the set caps one.
        row: Object.assign({}, row, { endUserScope, endUserId: endUserScope ? row.endUserId : null, provider: null, model: null }),
      };
      states.set(setKey, state);
      // A limit changed (lowered, say): the lease sized under the old one is given back now,
      // but for what its requests in flight drew, rather than once it has idled a second.
      const previous = newest.get(windowsKey);
      newest.set(windowsKey, state);
      if (previous && states.get(previous.setKey) === previous) void stepState(previous, true).catch(() => undefined);
    }
    return state;
  }

  /**
   * One step of a lease: the spend settled since the last one goes to the windows, and the lease
   * is held again at its floor plus spare room sized from demand. The floor is what is drawn now
   * and a little of the room left (the flight allowance), which Redis keeps whatever the limit
   * says: it was held already. Draws made while the step is in flight see only the floor, so
   * none can outrun what Redis will hold.
   */
  async function step(state: LeaseState, giveBack: boolean): Promise<void> {
    const at = now();
    const seconds = Math.max(0.001, (at - state.lastStepAt) / 1000);
    state.rate = giveBack ? 0 : averagedDemand(state.rate, state.demand, seconds);
    const allowance = Math.max(0, Math.min(state.amount - state.drawn - state.unflushed, state.rate * FLIGHT_ALLOWANCE_SECONDS));
    const spent = state.unflushed;
    // The ledger rows of what this step adds carry this reference (`leases.end`), and those
    // settled while it is in flight the next one: a rebuild of a missing window leaves out both,
    // whose spend this step and the next add.
    const unflushedRefs = [leaseRefOf(state), leaseRefOf({ leaseId: state.leaseId, generation: state.generation + 1 })];
    const costs = state.costs;
    if (costs) state.costs = [];
    // A set without a blocking scope holds nothing: its requests in flight need no room kept.
    const floor = state.blocking ? state.drawn + allowance : 0;
    const worst = state.worst;
    state.worst = 0;
    state.demand = 0;
    state.misses = 0;
    state.lastStepAt = at;
    state.unflushed = 0;
    state.amount = floor;
    // Costs settled from here on lapse with this step's lease if the process dies: their rows say so.
    state.generation += 1;
    const spare = state.blocking ? state.rate * LEASE_DEMAND_SECONDS : 0;
    // Nothing to add, hold or give back: no Redis call (a key without a blocking limit whose
    // calls are all still in flight is not even in Redis yet). The set is kept while they are.
    if (spent === 0 && floor === 0 && spare === 0 && !state.held) {
      if (state.inFlight === 0) forget(state);
      return;
    }
    const windows: ScopeWindow[] = state.scopes;
    let stepSpent = spent;
    try {
      for (let attempt = 0; ; attempt++) {
        // A lease lives LEASE_TTL_MS from the attempt that grants it. A step held up before its
        // retry (its windows rebuilt from Postgres, seconds under load) once granted leases
        // already past their expiry, which another process then swept as lapsed and counted
        // in full (bench:scale-out, 2026-11-27).
        const sentAt = attempt === 0 ? at : now();
        const outcome = await stepLease(deps.redis.redis, windows, {
          leaseId: state.leaseId, spentNanos: stepSpent, floorNanos: floor, spareNanos: spare, leastRoomNanos: NO_LEASE_UNDER_WORST_CASES * worst,
          shareOfRoom: LEASE_SHARE_OF_ROOM, allLeasesShareOfRoom: ALL_LEASES_SHARE_OF_ROOM, held: state.held, leaseExpiresAt: new Date(sentAt + LEASE_TTL_MS),
          lapseRecord: Object.assign({}, state.row, { id: newId('spend'), requestId: state.leaseId, leaseRef: leaseRefOf(state), createdAt: new Date(at), updatedAt: new Date(at) }),
        }, new Date(sentAt));
        if (outcome.state === 'ok') {
          state.amount = outcome.grantedNanos;
          state.held = outcome.grantedNanos > 0;
          if (state.held) state.registeredRef = leaseRefOf(state);
          if (state.inFlight === 0) state.swept.clear();
          if (stepSpent > 0) deps.upkeep.recordCrossings(state.scopes, outcome.totals, stepSpent, costs ?? undefined);
          if (outcome.lapsed) void deps.upkeep.recordLapsed(state.orgId, new Date(at)).catch(() => undefined);
          break;
        }
        if (attempt >= 2) throw new Error(`lease step did not settle (${outcome.state})`);
        if (outcome.state === 'missing') {
          await deps.upkeep.seedMissing(outcome.windows as SpendScope[], { excludeLeaseRefs: unflushedRefs });
        } else {
          // Swept as lapsed (this process looked dead): settled in full, which covers what was
          // spent under it, and the requests drawn from it still in flight. A new lease, under a
          // new id (a swept id is marked settled).
          if (state.registeredRef) state.swept.set(state.leaseId, state.registeredRef);
          state.registeredRef = null;
          state.leaseId = newLeaseId();
          state.held = false;
          stepSpent = 0;
        }
      }
    } catch {
      // Redis unreachable: the spend is kept for the next step (added twice at worst if this one
      // landed unanswered: an over-count, never an under-count), and no draw outruns the floor.
      state.unflushed += stepSpent;
      if (costs && stepSpent > 0) state.costs = costs.concat(state.costs!);
    }
    if (state.inFlight === 0 && state.unflushed === 0 && !state.held && state.demand === 0) forget(state);
  }

  function stepState(state: LeaseState, giveBack: boolean): Promise<void> {
    if (state.stepping) return state.stepping.then(() => stepState(state, giveBack));
    state.stepping = step(state, giveBack).finally(() => {
      state.stepping = null;
    });
    return state.stepping;
  }

  async function stepAll(orgId: string | null, giveBack: boolean): Promise<void> {
    const due = [...states.values()].filter((s) => orgId === null || s.orgId === orgId);
    await Promise.all(due.map((s) => (s.stepping && !giveBack && orgId === null ? undefined : stepState(s, giveBack))));
  }

  return {
    draw(scopes, nanos, row) {
      if (closed) return null;
      const state = stateFor(scopes, row);
      state.demand += nanos;
      if (nanos > state.worst) state.worst = nanos;
      if (state.blocking && state.amount - state.drawn - state.unflushed < nanos) {
        // A busy scope set without room in its lease steps now rather than at the next tick.
        if (++state.misses === STEP_NOW_AFTER_MISSES && !state.stepping) void stepState(state, false).catch(() => undefined);
        return null;
      }
      state.drawn += nanos;
      state.inFlight += 1;
      return { state, nanos, leaseId: state.leaseId };
    },

    end(draw, costNanos) {
      const state = draw.state;
      state.drawn -= draw.nanos;
      state.inFlight -= 1;
      // Drawn from a lease swept since: its lapse, settled in full, counted this request; its row
      // carries that lapse's ref, so a rebuild counts the two once.
      const sweptRef = draw.leaseId === state.leaseId ? undefined : state.swept.get(draw.leaseId);
      if (sweptRef) return sweptRef;
      // Never dropped while drawn from: the next step flushes this.
      state.unflushed += costNanos;
      if (state.costs && costNanos !== 0) state.costs.push(costNanos);
      return leaseRefOf(state);
    },

    flush(orgId) {
      return stepAll(orgId ?? null, false);
    },

    async close() {
      closed = true;
      clearInterval(timer);
      await stepAll(null, true);
    },
  };
}

/**
 * The spend ledger with leases in front: a request that may lease (`leasable`, a synchronous
 * model call) draws from its scope set's lease, else holds exactly as before; its row goes to
 * the ledger when it settles, as before, and its cost reaches the windows with the next step.
 * Reads of settled spend first flush this process's spend in the organization, so an answer
 * includes everything this process has settled.
 */
export function leasedSpendLedger(ledger: SpendLedger, leases: SpendLeases, deps: { redis: RedisHandle; rows: BatchWriter<SpendLedgerRow>; rate: RateLeases }): SpendLedger {
  function drawFor(input: ReserveInput): Hold | null {
    if (!input.leasable || !input.lapseRow && input.scopes.some((s) => s.blocking)) return null;
    const row = input.lapseRow ?? ({ id: '', orgId: input.scopes[0]!.orgId } as LeaseRowTemplate);
    const draw = leases.draw(input.scopes, toNanos(input.amount), row);
    return draw ? { id: input.holdId, scopes: input.scopes, amount: input.amount, lease: draw } : null;
  }

  return {
    async reserve(input) {
      return drawFor(input) ?? ledger.reserve(input);
    },

    async reserveCounted(input) {
      // The request is counted from this process's block of the key's rate window when it can be.
      const local = deps.rate.take(input.rate, Date.now());
      if (local) {
        input.counted(local);
        return drawFor(input) ?? ledger.reserve(input);
      }
      const hold = drawFor(input);
      if (!hold) return ledger.reserveCounted(input);
      let window: RateCount;
      try {
        window = await countInWindow(deps.redis.redis, input.rate.key, input.rate.windowMs);
      } catch (err) {
        leases.end(hold.lease!, 0);
        throw err;
      }
      input.counted(window);
      if (window.count > input.rate.limit) {
        leases.end(hold.lease!, 0);
        return null;
      }
      return hold;
    },

    async settle(hold, cost, row) {
      if (!hold.lease) return ledger.settle(hold, cost, row);
      const nanos = toNanos(cost);
      const leaseRef = leases.end(hold.lease, nanos);
      // Under the id a pending row of the call was kept under (BatchWriter.pending), so one of the two is kept.
      if (row && nanos !== 0) deps.rows.record(Object.assign({}, row, { amount: toDollars(nanos), state: 'settled' as const, leaseRef }, hold.rowId && { id: hold.rowId }));
    },

    async release(hold) {
      if (!hold.lease) return ledger.release(hold);
      leases.end(hold.lease, 0);
    },

    async renew(hold, leaseMs, now) {
      // A lease lives as long as its process steps it.
      if (!hold.lease) await ledger.renew(hold, leaseMs, now);
    },

    async spent(scopes) {
      if (scopes[0]) await leases.flush(scopes[0].orgId);
      return ledger.spent(scopes);
    },

    flush(orgId) {
      return leases.flush(orgId);
    },
  };
}
