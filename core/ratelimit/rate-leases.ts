import type { RedisHandle } from '../redis';
import { redisScript } from '../redis-script';
import type { WindowCount } from './fixed-window';

/**
 * The per-minute request count leased per process (issue 37, rule 6), as spend is
 * (core/spend/leases.ts): a process takes a block of a key's slots in the current window from
 * the shared counter, about a second of its request rate and at most a tenth of the slots left
 * (none when few are left), counts requests from it without a Redis call, and gives the unused
 * slots back at every step. The shared counter is then an upper bound of what was served, so
 * `X-RateLimit-Remaining` stays the spec's best-effort upper bound; `X-RateLimit-Reset` is the
 * window's end as Redis keeps it.
 */

/** A key's rate window: its counter, the window's length and the tier. */
export type RateWindow = { key: string; windowMs: number; limit: number };

/** Slots are given back and the block resized this often. */
export const RATE_LEASE_STEP_MS = 250;
/** A block is about this many seconds of the process's requests on the key... */
const BLOCK_SECONDS = 1;
/** ...at most this share of the slots left in the window... */
const BLOCK_SHARE_OF_SLOTS_LEFT = 0.1;
/**
 * ...and none while fewer slots than this are left: every request is counted in Redis. A tier
 * this low (1,000 a minute is 17 a second) gains nothing from blocks, and its count stays exact
 * across processes: no request is refused for a slot another process holds.
 */
const NO_BLOCK_UNDER_SLOTS_LEFT = 1000;
/** After this many requests without a slot since the last step, a key steps at once (a burst need not wait for the tick). */
const STEP_NOW_AFTER_MISSES = 8;
/** While a step is in flight, about this many seconds of requests are counted from slots kept back from it. */
const FLIGHT_ALLOWANCE_SECONDS = 0.1;
/** A block is not drawn on this close to its window's end (the window may already have rolled over in Redis). */
const WINDOW_END_MARGIN_MS = 50;

const RATE_STEP = redisScript(`
local key = KEYS[1]
local expiry = redis.call('PEXPIRETIME', key)
local count
-- Unused slots go back only to the window they were taken from.
if tonumber(ARGV[2]) > 0 and expiry == tonumber(ARGV[3]) then
  count = redis.call('DECRBY', key, ARGV[2])
else
  count = tonumber(redis.call('GET', key) or '0')
end
local left = tonumber(ARGV[7]) - count
local grant = 0
if left >= tonumber(ARGV[6]) then grant = math.min(tonumber(ARGV[4]), math.floor(left * tonumber(ARGV[5]))) end
if grant > 0 then
  count = redis.call('INCRBY', key, grant)
  if expiry < 0 then
    redis.call('PEXPIRE', key, ARGV[1])
    expiry = redis.call('PEXPIRETIME', key)
  end
end
return {grant, count, redis.call('PTTL', key), expiry}
`);

/**
 * A lease's demand per second, averaged over steps (spend and rate leases both): half the last
 * interval's, half what came before; none after an idle interval, so an idle lease is given back
 * at the next step.
 */
export function averagedDemand(previous: number, demand: number, seconds: number): number {
  if (demand === 0) return 0;
  return previous === 0 ? demand / seconds : (previous + demand / seconds) / 2;
}

type RateLeaseState = {
  readonly id: string;
  readonly window: RateWindow;
  /** Slots of the block not used yet. */
  slots: number;
  /** The shared counter after this process's last step (its whole block included). */
  seen: number;
  /** The window's end: locally (for the headers), and as Redis keeps it (which window the slots came from). */
  endsAt: number;
  redisExpiry: number;
  /** Requests asked for since the last step, and their rate per second averaged over steps. */
  demand: number;
  /** Requests since the last step that found no slot in the block. */
  misses: number;
  rate: number;
  lastStepAt: number;
  stepping: Promise<void> | null;
};

export type RateLeases = {
  /** Counts one request from this process's block of the key's window, or null (count it in Redis). */
  take(window: RateWindow, nowMs: number): WindowCount | null;
  /** Gives every block back (shutdown). */
  close(): Promise<void>;
};

export function createRateLeases(deps: { redis: RedisHandle; stepMs?: number; now?: () => number }): RateLeases {
  const now = deps.now ?? Date.now;
  const states = new Map<string, RateLeaseState>();
  let closed = false;
  const timer = setInterval(() => void stepAll(false), deps.stepMs ?? RATE_LEASE_STEP_MS);
  timer.unref();

  async function step(state: RateLeaseState, giveBackAll: boolean): Promise<void> {
    const at = now();
    const seconds = Math.max(0.001, (at - state.lastStepAt) / 1000);
    state.rate = giveBackAll ? 0 : averagedDemand(state.rate, state.demand, seconds);
    state.demand = 0;
    state.misses = 0;
    state.lastStepAt = at;
    // A few slots are kept to count from while the step is in flight; the rest go back, and are
    // not drawn on meanwhile.
    const kept = at < state.endsAt - WINDOW_END_MARGIN_MS ? Math.min(state.slots, Math.ceil(state.rate * FLIGHT_ALLOWANCE_SECONDS)) : 0;
    const giveBack = state.slots - kept;
    state.slots = kept;
    const want = Math.ceil(state.rate * BLOCK_SECONDS);
    if (giveBack === 0 && want === 0 && kept === 0) {
      states.delete(state.id);
      return;
    }
    try {
      const [grant, count, ttl, expiry] = (await RATE_STEP(deps.redis.redis, [state.window.key], [
        state.window.windowMs, giveBack, state.redisExpiry, want, BLOCK_SHARE_OF_SLOTS_LEFT, NO_BLOCK_UNDER_SLOTS_LEFT, state.window.limit,
      ])) as [number, number, number, number];
      // Kept slots still count only in the window they came from.
      state.slots = expiry === state.redisExpiry ? state.slots + grant : grant;
      state.seen = count;
      state.endsAt = ttl > 0 ? at + ttl : at;
      state.redisExpiry = expiry;
    } catch {
      // Redis unreachable: the slots stay out until their window ends (the counter over-counts;
      // requests past the tier are never let through for it).
    }
  }

  function stepOne(state: RateLeaseState, giveBackAll: boolean): Promise<void> | undefined {
    if (state.stepping) return giveBackAll ? state.stepping.then(() => step(state, true)) : undefined;
    state.stepping = step(state, giveBackAll).finally(() => {
      state.stepping = null;
    });
    return state.stepping;
  }

  function stepAll(giveBackAll: boolean): Promise<unknown> {
    return Promise.all([...states.values()].map((state) => stepOne(state, giveBackAll)));
  }

  return {
    take(window, nowMs) {
      // A tier this low never gets a block: nothing to keep, and no step to pay for.
      if (window.limit < NO_BLOCK_UNDER_SLOTS_LEFT) return null;
      // Per counter and tier: a key's tier changed has a block of its own, and the old one goes back.
      const id = `${window.key}|${window.limit}`;
      let state = states.get(id);
      if (!state) {
        if (closed) return null;
        state = { id, window, slots: 0, seen: 0, endsAt: 0, redisExpiry: -2, demand: 0, misses: 0, rate: 0, lastStepAt: nowMs, stepping: null };
        states.set(id, state);
      }
      state.demand += 1;
      if (state.slots <= 0 || nowMs >= state.endsAt - WINDOW_END_MARGIN_MS) {
        // A busy key without a block steps now rather than at the next tick.
        if (++state.misses === STEP_NOW_AFTER_MISSES && !state.stepping) void stepOne(state, false);
        return null;
      }
      state.slots -= 1;
      return { count: state.seen - state.slots, resetInMs: state.endsAt - nowMs };
    },

    async close() {
      closed = true;
      clearInterval(timer);
      await stepAll(true);
    },
  };
}
