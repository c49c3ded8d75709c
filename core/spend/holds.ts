import type { RedisClient } from '../redis';
import { redisScript } from '../redis-script';

/** Lua shared by the scripts below: when a window is lost, and how a hold leaves a window. */
const HOLD_LUA = `
-- A window is lost when its settled counter is gone, or its held total, leases and amounts
-- disagree (one of them evicted or flushed): it is repaired from Postgres before anything else.
local function lost(s, h, z, a)
  if redis.call('EXISTS', s) == 0 then return true end
  local na = redis.call('HLEN', a)
  if redis.call('ZCARD', z) ~= na then return true end
  local held = redis.call('GET', h)
  if not held then return na > 0 end
  held = tonumber(held)
  return held < 0 or (held > 0 and na == 0)
end
-- The total of a window's process leases (ids 'lease:...'), part of its held total, is kept
-- beside it under the same hash tag: what caps all leases of the window together.
local function leases_key(h) return string.sub(h, 1, -2) .. 'l' end
local function is_lease(id) return string.sub(id, 1, 6) == 'lease:' end
-- Moves the lease total; a lost total is not started again by a decrease (a repair recounts it).
local function move_leases(h, delta)
  if delta == 0 then return end
  local l = leases_key(h)
  if delta > 0 or redis.call('EXISTS', l) == 1 then redis.call('INCRBY', l, string.format('%.0f', delta)) end
end
-- A hold leaves a window: its amount off the held total, its amount and lease gone.
local function drop_hold(h, z, a, id)
  local held = redis.call('HGET', a, id)
  if held then
    redis.call('DECRBY', h, held)
    if is_lease(id) then move_leases(h, -tonumber(held)) end
  end
  redis.call('HDEL', a, id)
  redis.call('ZREM', z, id)
end
-- Holds whose lease passed leave a window (not 'keep'), except one registered to lapse (a chat
-- hold or a process lease in 'live'): its instance may be dead with its calls billed, so its
-- amount stays held until SWEEP moves it to the settled total in one step. Dropped here, its
-- room would be reused before its amount reached the settled counter (issue 54, item 2).
local function drop_expired(h, z, a, live, now, keep)
  local dropped = false
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', z, '-inf', now)) do
    if gone ~= keep and not redis.call('ZSCORE', live, gone) then
      drop_hold(h, z, a, gone)
      dropped = true
    end
  end
  return dropped
end
`;

/**
 * The spend counters in Redis, one set per scope and budget window, each key carrying the
 * organization as a hash tag (`{org_...}`) so one script's keys share a Redis Cluster slot:
 * `s` settled nano-dollars, `h` the total of live holds, `z` holds by lease expiry, `a` each
 * hold's amount. A reservation is one script: it drops expired holds, checks every blocking
 * scope (settled + held + this hold fits the limit), and only then holds the amount in all.
 */
export type ScopeWindow = {
  /** `<org id>` hash tag and the scope, e.g. `key:<lineage id>`. */
  orgId: string;
  scope: string;
  /** The window's id: its period and start day, `lifetime`, and when the period changed (scopes.ts windowId). */
  window: string;
  /** Null: counted, never refused (no limit, or `behavior: alert`). */
  limitNanos: number | null;
  /** How long the window's keys outlive it, in seconds; 0 keeps them (lifetime). */
  ttlSeconds: number;
};

function windowBase(w: Pick<ScopeWindow, 'orgId' | 'scope' | 'window'>): string {
  return `spend:{${w.orgId}}:${w.scope}:${w.window}`;
}

export function windowKeys(w: Pick<ScopeWindow, 'orgId' | 'scope' | 'window'>): [string, string, string, string] {
  const base = windowBase(w);
  return [`${base}:s`, `${base}:h`, `${base}:z`, `${base}:a`];
}

/**
 * The organization's registry of chat holds that hold money: `live` (hold id by lease expiry)
 * and `meta` (what to record if it lapses). A hold whose instance died never settles; when its
 * lease passes it is found here, settled at its amount in every window and recorded in the
 * ledger, so a crash mid-call does not make the call free (`sweepLapsedHolds`).
 */
function holdRegistryKeys(windows: ReadonlyArray<Pick<ScopeWindow, 'orgId'>>): [string, string] {
  const org = windows[0]?.orgId ?? '';
  return [`spend:{${org}}:live`, `spend:{${org}}:meta`];
}

/** The ledger row a lapsed hold is recorded with (its amount and state are added then). */
export type LapseRecord = Record<string, unknown>;

const SWEEP = redisScript(HOLD_LUA + `
local live, meta = KEYS[1], KEYS[2]
local prefix = ARGV[2]
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', live, '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))) do
  local record = redis.call('HGET', meta, id)
  redis.call('ZREM', live, id)
  redis.call('HDEL', meta, id)
  -- Settled once: a late settle of the same hold (its instance was not dead after all) adds nothing.
  local marker = prefix .. string.sub(live, #prefix + 1, -5) .. 'settled:' .. id
  if record and redis.call('SET', marker, '1', 'NX', 'EX', ARGV[4]) then
    local d = cjson.decode(record)
    for _, base in ipairs(d.w) do
      local s = prefix .. base .. ':s'
      drop_hold(prefix .. base .. ':h', prefix .. base .. ':z', prefix .. base .. ':a', id)
      if redis.call('EXISTS', s) == 1 then redis.call('INCRBY', s, string.format('%.0f', d.n)) end
    end
    out[#out + 1] = record
  end
end
return out
`);

/**
 * Settles the organization's lapsed chat holds at their amounts (at most `limit` a call) and
 * answers what to record for each: its amount in nano-dollars and its ledger row.
 */
export async function sweepLapsedHolds(redis: RedisClient, orgId: string, now: Date, limit = 100): Promise<Array<{ nanos: number; row: LapseRecord }>> {
  const prefix = (redis.options.keyPrefix as string | undefined) ?? '';
  const found = (await SWEEP(redis, holdRegistryKeys([{ orgId }]), [now.getTime(), prefix, limit, SETTLED_MARKER_SECONDS])) as string[];
  return found.map((text) => {
    const d = JSON.parse(text) as { n: number; r: LapseRecord };
    return { nanos: d.n, row: d.r };
  });
}

const RESERVE = redisScript(HOLD_LUA + `
local now = tonumber(ARGV[1])
local expiry = ARGV[2]
local id = ARGV[3]
local amount = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local count, ttl = 0, 0
if tonumber(ARGV[6]) > 0 then
  local rate = KEYS[4 * n + 4]
  count = redis.call('INCR', rate)
  ttl = redis.call('PTTL', rate)
  -- A new window (no expiry yet); a count that slots given back brought to 0 keeps its window.
  if ttl < 0 then
    redis.call('PEXPIRE', rate, ARGV[6])
    ttl = tonumber(ARGV[6])
  end
  if count > tonumber(ARGV[7]) then return {'rate', count, ttl} end
end
local missing = {}
for i = 1, n do
  if lost(KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]) then missing[#missing + 1] = i end
end
if #missing > 0 then
  table.insert(missing, 1, ttl)
  table.insert(missing, 1, count)
  table.insert(missing, 1, 'missing')
  return missing
end
local live, meta = KEYS[4 * n + 2], KEYS[4 * n + 3]
for i = 1, n do drop_expired(KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i], live, now, nil) end
-- Chat holds whose instance died (their lease passed with no settle): the caller records them.
local lapsed = #redis.call('ZRANGEBYSCORE', live, '-inf', now, 'LIMIT', 0, 1)
-- The same hold twice (a retried step) holds once: its lease is renewed, nothing is added.
if n > 0 and redis.call('HEXISTS', KEYS[4], id) == 1 then
  for i = 1, n do redis.call('ZADD', KEYS[4 * i - 1], 'XX', expiry, id) end
  redis.call('ZADD', live, 'XX', expiry, id)
  return {'ok', count, ttl, lapsed}
end
for i = 1, n do
  local limit = tonumber(ARGV[6 + 2 * i])
  if limit >= 0 then
    local used = tonumber(redis.call('GET', KEYS[4 * i - 3]) or '0') + tonumber(redis.call('GET', KEYS[4 * i - 2]) or '0')
    if used + amount > limit then return {'refused', count, ttl, i, tostring(used), lapsed} end
  end
end
-- A new hold under an id that was settled before (a job resumed after its start failed) settles anew.
redis.call('DEL', KEYS[4 * n + 1])
for i = 1, n do
  local s, h, z, a = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  redis.call('INCRBY', h, ARGV[4])
  redis.call('ZADD', z, expiry, id)
  redis.call('HSET', a, id, ARGV[4])
  local keep = tonumber(ARGV[7 + 2 * i])
  if keep > 0 then
    for _, k in ipairs({s, h, z, a}) do redis.call('EXPIRE', k, keep) end
  end
end
-- A hold with a ledger row to write if it lapses (a chat call holding money) is registered.
local record = ARGV[8 + 2 * n]
if record and record ~= '' then
  redis.call('ZADD', live, expiry, id)
  redis.call('HSET', meta, id, record)
end
return {'ok', count, ttl, lapsed}
`);

// Drops the hold and adds the actual cost to each scope that still has its counter: a counter
// lost with Redis is rebuilt from the Postgres ledger, which records this cost too. A hold is
// settled once: a marker (the last key) makes a repeated settle change nothing.
const SETTLE = redisScript(HOLD_LUA + `
local id = ARGV[1]
local actual = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local totals = {}
-- A counter lost with Redis is rebuilt before anything is added to it: say which, change nothing.
if ARGV[5] == '1' then
  local missing = {}
  -- Only the settled counter matters here (this cost is added to it); a held total or
  -- amounts that disagree are repaired by the next reservation, which checks all four.
  for i = 1, n do
    if redis.call('EXISTS', KEYS[4 * i - 3]) == 0 then missing[#missing + 1] = i end
  end
  if #missing > 0 then
    table.insert(missing, 1, 'missing')
    return missing
  end
end
-- Ended: no longer a hold that could lapse (only a registered one is looked for).
if ARGV[6] == '1' then
  redis.call('ZREM', KEYS[4 * n + 2], id)
  redis.call('HDEL', KEYS[4 * n + 3], id)
end
if redis.call('SET', KEYS[4 * n + 1], '1', 'NX', 'EX', ARGV[4]) == false then
  return {'already'}
end
for i = 1, n do
  local s = KEYS[4 * i - 3]
  drop_hold(KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i], id)
  totals[i] = -1
  if redis.call('EXISTS', s) == 1 then
    totals[i] = actual ~= 0 and redis.call('INCRBY', s, ARGV[2]) or tonumber(redis.call('GET', s))
  end
end
return totals
`);

/** A request counted in its key's rate window by the same step (`count` and the window's ms left). */
export type RateCount = { count: number; resetInMs: number };
/** Count the request in this rate window first; past `limit`, nothing is held. */
export type RateWindow = { key: string; windowMs: number; limit: number };

export type ReserveOutcome = { rate: RateCount | null } & (
  | { state: 'ok'; lapsed: boolean }
  | { state: 'rate_limited' }
  | { state: 'missing'; windows: ScopeWindow[] }
  | { state: 'refused'; window: ScopeWindow; usedNanos: number; lapsed: boolean });

/**
 * Holds `amountNanos` in every window until `leaseExpiresAt`, if each blocking one has room; with
 * `rate`, the request is first counted in its key's rate window in the same round trip.
 */
export async function holdSpend(redis: RedisClient, holdId: string, windows: ScopeWindow[], amountNanos: number, now: Date, leaseExpiresAt: Date, rate?: RateWindow, lapseRecord?: LapseRecord): Promise<ReserveOutcome> {
  const keys = [...windows.flatMap(windowKeys), settledMarkerKey(windows, holdId), ...holdRegistryKeys(windows), ...(rate ? [rate.key] : [])];
  const args = windows.flatMap((w) => [w.limitNanos ?? -1, w.ttlSeconds]);
  // Registered only when the hold holds money: a lapse of nothing records nothing.
  const record = lapseRecord && amountNanos > 0 ? JSON.stringify({ n: amountNanos, w: windows.map((w) => windowBase(w)), r: lapseRecord }) : '';
  const answer = (await RESERVE(redis, keys, [now.getTime(), leaseExpiresAt.getTime(), holdId, amountNanos, windows.length, rate?.windowMs ?? 0, rate?.limit ?? 0, ...args, record])) as Array<string | number>;
  const counted = rate ? { count: Number(answer[1]), resetInMs: Number(answer[2]) > 0 ? Number(answer[2]) : rate.windowMs } : null;
  if (answer[0] === 'ok') return { state: 'ok', rate: counted, lapsed: Number(answer[3]) > 0 };
  if (answer[0] === 'rate') return { state: 'rate_limited', rate: counted };
  if (answer[0] === 'missing') return { state: 'missing', rate: counted, windows: answer.slice(3).map((i) => windows[Number(i) - 1]!) };
  return { state: 'refused', rate: counted, window: windows[Number(answer[3]) - 1]!, usedNanos: Number(answer[4]), lapsed: Number(answer[5]) > 0 };
}

/**
 * Ends a hold: the actual cost (0 on a release) joins each window's settled spend. Answers each
 * window's settled total after it (null where the counter is missing).
 */
export async function settleHold(redis: RedisClient, holdId: string, windows: ScopeWindow[], actualNanos: number, registered = false): Promise<Array<number | null>> {
  const outcome = await settleHoldUnlessMissing(redis, holdId, windows, actualNanos, false, registered);
  return outcome.state === 'settled' ? outcome.totals : outcome.state === 'already' ? windows.map(() => null) : [];
}

/** Takes a hold out of the lapse registry (its end could not be recorded in Redis; its row is in the ledger). */
export async function unregisterHold(redis: RedisClient, windows: ReadonlyArray<Pick<ScopeWindow, 'orgId'>>, holdId: string): Promise<void> {
  const [live, meta] = holdRegistryKeys(windows);
  await Promise.all([redis.zrem(live, holdId), redis.hdel(meta, holdId)]);
}

/** `already`: the hold was settled before (a retried step, or swept as lapsed): nothing changed. */
export type SettleOutcome = { state: 'settled'; totals: Array<number | null> } | { state: 'missing'; windows: ScopeWindow[] } | { state: 'already' };

/**
 * `settleHold` in one round trip that first makes sure every window's counter exists: when one
 * is missing nothing changes and the missing windows are answered, to be rebuilt and settled again.
 */
export async function settleHoldUnlessMissing(redis: RedisClient, holdId: string, windows: ScopeWindow[], actualNanos: number, checkMissing = true, registered = false): Promise<SettleOutcome> {
  if (windows.length === 0) return { state: 'settled', totals: [] };
  const keys = [...windows.flatMap(windowKeys), settledMarkerKey(windows, holdId), ...holdRegistryKeys(windows)];
  const answer = (await SETTLE(redis, keys, [holdId, actualNanos, windows.length, SETTLED_MARKER_SECONDS, checkMissing ? 1 : 0, registered ? 1 : 0])) as Array<number | string>;
  if (answer[0] === 'missing') return { state: 'missing', windows: answer.slice(1).map((i) => windows[Number(i) - 1]!) };
  if (answer[0] === 'already') return { state: 'already' };
  return { state: 'settled', totals: (answer as number[]).map((t) => (t < 0 ? null : t)) };
}

/** The key that says a hold was settled; under the organization's tag like the rest. */
function settledMarkerKey(windows: ScopeWindow[], holdId: string): string {
  return `spend:{${windows[0]?.orgId ?? ''}}:settled:${holdId}`;
}

/** A settled hold's marker outlives any retry of the step that settled it. */
const SETTLED_MARKER_SECONDS = 3 * 86_400;

const RENEW = redisScript(`
for i = 1, #KEYS do redis.call('ZADD', KEYS[i], 'XX', ARGV[2], ARGV[1]) end
return 'ok'
`);

/** Moves a live hold's lease to `leaseExpiresAt` (a long stream keeps its room). */
export async function renewHold(redis: RedisClient, holdId: string, windows: ScopeWindow[], leaseExpiresAt: Date): Promise<void> {
  if (windows.length === 0) return;
  await RENEW(redis, [...windows.map((w) => windowKeys(w)[2]), holdRegistryKeys(windows)[0]], [holdId, leaseExpiresAt.getTime()]);
}

/** A hold that outlives a lost window: a running job's, from its reserved ledger row. */
export type KeptHold = { id: string; nanos: number; expiresAt: number };

const REPAIR = redisScript(HOLD_LUA + `
local s, h, z, a = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl = tonumber(ARGV[2])
local fresh = ARGV[3]
redis.call('SET', s, ARGV[1], 'NX')
for i = 4, #ARGV, 3 do
  redis.call('HSETNX', a, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', z, 'NX', ARGV[i + 2], ARGV[i])
end
-- An amount whose lease was lost is leased afresh; a lease whose amount was lost is dropped.
for _, id in ipairs(redis.call('HKEYS', a)) do redis.call('ZADD', z, 'NX', fresh, id) end
for _, id in ipairs(redis.call('ZRANGE', z, 0, -1)) do
  if redis.call('HEXISTS', a, id) == 0 then redis.call('ZREM', z, id) end
end
-- The held total, and the leases' part of it, are what the amounts say.
local total, leased = 0, 0
local amounts = redis.call('HGETALL', a)
for i = 1, #amounts, 2 do
  local v = tonumber(amounts[i + 1])
  total = total + v
  if is_lease(amounts[i]) then leased = leased + v end
end
redis.call('SET', h, string.format('%.0f', total))
redis.call('SET', leases_key(h), string.format('%.0f', leased))
if ttl > 0 then
  for _, k in ipairs({s, h, z, a, leases_key(h)}) do redis.call('EXPIRE', k, ttl) end
end
return 'ok'
`);

/**
 * Repairs a lost window: the settled total rebuilt from the ledger (unless another instance
 * wrote it first), running jobs' holds put back from Postgres, amounts and leases made to agree,
 * and the held total recomputed from the amounts. Chat holds lost with their amounts are not
 * known; their requests still settle into the settled total when they end.
 */
export async function repairWindow(redis: RedisClient, window: ScopeWindow, settledNanos: bigint, kept: readonly KeptHold[], freshLeaseExpiresAt: Date): Promise<void> {
  const args = kept.flatMap((k) => [k.id, k.nanos, k.expiresAt]);
  await REPAIR(redis, windowKeys(window), [settledNanos.toString(), window.ttlSeconds, freshLeaseExpiresAt.getTime(), ...args]);
}

/** Writes a window's settled total (rebuilt from the ledger) unless another instance did first. */
export async function seedWindow(redis: RedisClient, window: ScopeWindow, settledNanos: bigint): Promise<void> {
  const [s] = windowKeys(window);
  if (window.ttlSeconds > 0) await redis.set(s, settledNanos.toString(), 'EX', window.ttlSeconds, 'NX');
  else await redis.set(s, settledNanos.toString(), 'NX');
}

/** Settled nano-dollars of each window (0 when its counter is missing). */
export async function settledNanos(redis: RedisClient, windows: ScopeWindow[]): Promise<Array<string | null>> {
  if (windows.length === 0) return [];
  return redis.mget(windows.map((w) => windowKeys(w)[0]));
}

// A lease's step in as few commands as it can (it runs for every scope set every 250 ms): the
// windows' settled totals and held totals read once, the lease's amount moved by its difference,
// and a window's keys given their expiry only when the lease is new there.
const LEASE = redisScript(HOLD_LUA + `
local now = tonumber(ARGV[1])
local expiry = ARGV[2]
local id = ARGV[3]
local spent = tonumber(ARGV[4])
local floor = tonumber(ARGV[5])
local spare = tonumber(ARGV[6])
local least_room = tonumber(ARGV[7])
local share = tonumber(ARGV[8])
local expected = ARGV[9] == '1'
local n = tonumber(ARGV[10])
local settled, held, old, fresh = {}, {}, {}, false
local missing = {}
for i = 1, n do
  local s, h, a = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i]
  local sv, hv = redis.call('GET', s), redis.call('GET', h)
  -- A window is lost when its settled counter is gone, or its held total is while holds remain.
  if not sv or (not hv and redis.call('HLEN', a) > 0) then
    missing[#missing + 1] = i
  else
    settled[i], held[i] = tonumber(sv), tonumber(hv or '0')
    if not hv then fresh = true end
  end
end
if #missing > 0 then
  table.insert(missing, 1, 'missing')
  return missing
end
for i = 1, n do old[i] = tonumber(redis.call('HGET', KEYS[4 * i], id) or '0') end
-- A lease that should be here and is not was swept as lapsed (its process looked dead), and
-- then its settled marker is there: it was settled in full, which covers what was spent under
-- it; the caller starts a new lease. Without the marker the lease went with its window (Redis
-- lost it and it was rebuilt): the step goes on, and what it brings is added (issue 54, item 7).
if expected and old[1] == 0 and redis.call('EXISTS', KEYS[4 * n + 3]) == 1 then return {'swept'} end
local live, meta = KEYS[4 * n + 1], KEYS[4 * n + 2]
local lapsed = #redis.call('ZRANGEBYSCORE', live, '-inf', now, 'LIMIT', 0, 1)
for i = 1, n do
  local s, h, z, a = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  local dropped = drop_expired(h, z, a, live, now, id)
  if dropped then held[i] = tonumber(redis.call('GET', h) or '0') end
  if spent ~= 0 then settled[i] = redis.call('INCRBY', s, ARGV[4]) end
end
-- The lease keeps what requests in flight drew (the floor) and may add spare room: a share of
-- what is left, none where little is left; and all the window's leases together (this one's
-- floor and spare included) at most a larger share of the room there would be without them.
local all_share = tonumber(ARGV[12 + 2 * n])
for i = 1, n do
  local limit = tonumber(ARGV[9 + 2 * i])
  if limit >= 0 then
    local room = limit - settled[i] - (held[i] - old[i]) - floor
    if room < least_room then spare = 0 else spare = math.min(spare, math.floor(room * share)) end
    local leased = math.min(held[i], math.max(0, tonumber(redis.call('GET', leases_key(KEYS[4 * i - 2])) or '0')))
    local others = math.max(0, leased - old[i])
    local open = limit - settled[i] - (held[i] - leased)
    spare = math.max(0, math.min(spare, math.floor(open * all_share) - others - floor))
  end
end
local granted = floor + spare
local amount = string.format('%.0f', granted)
for i = 1, n do
  local s, h, z, a = KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i]
  if granted ~= old[i] then
    redis.call('INCRBY', h, string.format('%.0f', granted - old[i]))
    move_leases(h, granted - old[i])
  end
  if granted > 0 then
    redis.call('HSET', a, id, amount)
    redis.call('ZADD', z, expiry, id)
  elseif old[i] > 0 then
    redis.call('HDEL', a, id)
    redis.call('ZREM', z, id)
  end
  local keep = tonumber(ARGV[10 + 2 * i])
  if keep > 0 and granted > 0 and (fresh or old[i] == 0) then
    for _, k in ipairs({s, h, z, a, leases_key(h)}) do redis.call('EXPIRE', k, keep) end
  end
end
if granted > 0 then
  redis.call('ZADD', live, expiry, id)
  redis.call('HSET', meta, id, '{"n":' .. amount .. ',' .. ARGV[11 + 2 * n])
elseif old[1] > 0 then
  redis.call('ZREM', live, id)
  redis.call('HDEL', meta, id)
end
local out = {'ok', granted, lapsed}
for i = 1, n do out[#out + 1] = settled[i] end
return out
`);

/** A lease's step: spend settled since the last one, and the room to keep (`core/spend/leases.ts`). */
export type LeaseStep = {
  leaseId: string;
  /** Spent under the lease since its last step: added to every window's settled total. */
  spentNanos: number;
  /** What requests in flight drew from the lease: kept, whatever the room. */
  floorNanos: number;
  /** Room wanted beyond the floor. */
  spareNanos: number;
  /** No spare room where a blocking window has less than this left beyond the floor. */
  leastRoomNanos: number;
  /** At most this share of a blocking window's room left beyond the floor. */
  shareOfRoom: number;
  /** All leases of a blocking window together (floors included) at most this share of the room it would have without them. */
  allLeasesShareOfRoom: number;
  /** The lease is held now (it was granted room at its last step). */
  held: boolean;
  leaseExpiresAt: Date;
  /** The ledger row recorded if the lease lapses (its amount and state are added then). */
  lapseRecord: LapseRecord;
};

export type LeaseOutcome =
  | { state: 'ok'; grantedNanos: number; lapsed: boolean; totals: number[] }
  | { state: 'missing'; windows: ScopeWindow[] }
  | { state: 'swept' };

/**
 * One round trip for a process's lease on a set of windows: the spend settled under it joins
 * each window's settled total, the lease's old room is given back, and it is held again at its
 * floor plus what spare room the windows allow, until `leaseExpiresAt`. Registered to lapse like
 * a chat hold: a process that dies has its lease settled in full when it expires.
 */
export async function stepLease(redis: RedisClient, windows: ScopeWindow[], step: LeaseStep, now: Date): Promise<LeaseOutcome> {
  const keys = [...windows.flatMap(windowKeys), ...holdRegistryKeys(windows), settledMarkerKey(windows, step.leaseId)];
  const args = windows.flatMap((w) => [w.limitNanos ?? -1, w.ttlSeconds]);
  // The lapse record's amount is the granted room, written by the script: the rest is given here.
  const recordTail = JSON.stringify({ w: windows.map((w) => windowBase(w)), r: step.lapseRecord }).slice(1);
  const answer = (await LEASE(redis, keys, [
    now.getTime(), step.leaseExpiresAt.getTime(), step.leaseId, Math.round(step.spentNanos), Math.round(step.floorNanos), Math.round(step.spareNanos),
    Math.round(step.leastRoomNanos), step.shareOfRoom, step.held ? 1 : 0, windows.length, ...args, recordTail, step.allLeasesShareOfRoom,
  ])) as Array<string | number>;
  if (answer[0] === 'missing') return { state: 'missing', windows: answer.slice(1).map((i) => windows[Number(i) - 1]!) };
  if (answer[0] === 'swept') return { state: 'swept' };
  return { state: 'ok', grantedNanos: Number(answer[1]), lapsed: Number(answer[2]) > 0, totals: answer.slice(3).map(Number) };
}
