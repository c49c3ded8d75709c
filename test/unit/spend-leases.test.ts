import { GatewayError } from '../../core/errors';
import type { BatchWriter } from '../../core/db/batch-writer';
import { seedWindow, windowKeys } from '../../core/spend/holds';
import { organizations, spendLedger } from '../../core/db/schema';
import { createSpendLedger, createSpendUpkeep, ledgerWindowTotal, type Hold, type SpendLedgerRow, type SpendUpkeep } from '../../core/spend/ledger';
import { createRateLeases } from '../../core/ratelimit/rate-leases';
import { createSpendLeases, leasedSpendLedger, type SpendLeases } from '../../core/spend/leases';
import { toNanos } from '../../core/spend/money';
import { scopeAt, type SpendScope } from '../../core/spend/scopes';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { connectRedis, type RedisHandle } from '../../core/redis';
import { testDatabase, testRedis } from '../helpers/harness';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster';

/** Rows the ledger would write, kept in memory: these tests are about the Redis windows. */
function rowsKept(): BatchWriter<SpendLedgerRow> & { rows: SpendLedgerRow[] } {
  const rows: SpendLedgerRow[] = [];
  return { rows, record: (row) => void rows.push(row), dropped: () => 0, queued: () => 0, onFlush: () => undefined, flush: async () => undefined, pending: () => () => undefined, recover: async () => 0, close: async () => undefined };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A seeded random source, so a failing case can be run again. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/**
 * Spend leases (issue 37) against the real Redis, several "processes" (each its own lease state,
 * as each API process has) spending on one key at once: every limit stays an exact ceiling. Run
 * on one Redis and on a real three-master Redis Cluster.
 */
describe.each([['one Redis', false], ['a three-master Redis Cluster', true]] as const)('spend leases (core/spend/leases.ts) on %s', (_, onCluster) => {
  let redis: RedisHandle;
  let cluster: RedisCluster | null = null;
  const database = testDatabase();
  const processes: Array<Pick<SpendLeases, 'close'>> = [];
  beforeAll(async () => {
    cluster = onCluster ? await startRedisCluster() : null;
    redis = cluster ? connectRedis(cluster.url, globalThis.process.env.REDIS_KEY_PREFIX!) : testRedis();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.close().catch(() => undefined)));
    await redis.close();
    await cluster?.stop();
    await database.close();
  });

  function apiProcess(rows = rowsKept(), stepMs = 50, upkeepOf: (upkeep: SpendUpkeep) => SpendUpkeep = (u) => u) {
    const deps = { db: database.db, redis, rows };
    const upkeep = upkeepOf(createSpendUpkeep(deps));
    const leases = createSpendLeases({ redis, upkeep, stepMs });
    const rate = createRateLeases({ redis, stepMs: 50 });
    processes.push(leases, rate);
    return { leases, rows, spend: leasedSpendLedger(createSpendLedger(deps, upkeep), leases, { ...deps, rate }) };
  }

  function keyScope(org: string, lineage: string, limit: number, now = new Date()): SpendScope {
    return scopeAt(org, { kind: 'key', id: lineage, code: 'key_budget', limit, blocking: true, period: 'never', ledger: { column: 'lineage_id', value: lineage } }, now, 1);
  }

  const rowOf = (org: string, lineage: string, requestId: string) => ({
    id: `spend_${requestId}`, orgId: org, lineageId: lineage, projectId: 'proj_t', memberId: null, endUserId: null, endUserScope: null, requestId,
    createdAt: new Date(), updatedAt: new Date(), provider: 'openai', model: 'gpt-4o-mini',
  });

  /** One request: reserve its worst case (leased or exact), "call" for a moment, settle its cost. Answers the cost, or null when refused. */
  async function request(p: ReturnType<typeof apiProcess>, scopes: SpendScope[], id: string, worst: number, cost: number, ms: number, leased: { count: number }): Promise<number | null> {
    let hold: Hold;
    try {
      hold = await p.spend.reserve({ holdId: id, scopes, amount: worst, leaseMs: 60_000, now: new Date(), lapseRow: rowOf(scopes[0]!.orgId, 'lin', id), leasable: true });
    } catch (err) {
      if (err instanceof GatewayError && err.kind === 'key_budget') return null;
      throw err;
    }
    if (hold.lease) leased.count += 1;
    await sleep(ms);
    await p.spend.settle(hold, cost, rowOf(scopes[0]!.orgId, 'lin', id));
    return cost;
  }

  async function windowFigures(scope: SpendScope): Promise<{ settled: number; held: number }> {
    const [s, h] = await redis.redis.mget(windowKeys(scope)[0], windowKeys(scope)[1]);
    return { settled: Number(s ?? 0), held: Number(h ?? 0) };
  }

  it('never lets concurrent spenders on one key pass its limit (random costs, 2 to 4 processes)', async () => {
    for (const seed of [11, 29, 47]) {
      const rand = random(seed);
      const org = `org_lease${seed}${Date.now().toString(36)}`;
      const limit = Math.round((2 + rand() * 6) * 100) / 100;
      const scope = keyScope(org, `lin_${seed}`, limit);
      await seedWindow(redis.redis, scope, 0n);
      const procs = Array.from({ length: 2 + Math.floor(rand() * 3) }, () => apiProcess());
      const leased = { count: 0 };
      let admitted = 0;
      let breaches = 0;
      let done = false;
      // Between steps and holds, settled + held (leases included) is read atomically: never past the limit.
      const watcher = (async () => {
        while (!done) {
          const { settled, held } = await windowFigures(scope);
          if (settled + held > toNanos(limit)) breaches += 1;
          await sleep(2);
        }
      })();
      await Promise.all(procs.flatMap((p, pi) => Array.from({ length: 4 }, async (_, li) => {
        let refusedInARow = 0;
        for (let i = 0; refusedInARow < 15 && i < 2000; i++) {
          const worst = Math.round((0.002 + rand() * 0.03) * 1e6) / 1e6;
          const cost = Math.round(worst * rand() * 1e6) / 1e6;
          const spent = await request(p, [scope], `r${seed}_${pi}_${li}_${i}`, worst, cost, Math.floor(rand() * 3), leased);
          if (spent === null) {
            refusedInARow += 1;
            await sleep(5);
          } else {
            refusedInARow = 0;
            admitted += toNanos(spent);
          }
        }
      })));
      await Promise.all(procs.map((p) => p.leases.close()));
      done = true;
      await watcher;
      const { settled, held } = await windowFigures(scope);
      expect({ seed, breaches, held }).toEqual({ seed, breaches: 0, held: 0 });
      // Every admitted cost reached the window, exactly, and the total stays within the limit.
      expect(settled).toBe(admitted);
      expect(settled).toBeLessThanOrEqual(toNanos(limit));
      // Most requests drew from a lease (no Redis call), and spend came close to the limit.
      expect(leased.count).toBeGreaterThan(100);
      expect(settled).toBeGreaterThan(toNanos(limit) * 0.9);
    }
  }, 120_000);

  it('counts a key without a blocking limit in the process: nothing in Redis while in flight, every cost after, however long the call', async () => {
    const org = `org_leasefree${Date.now().toString(36)}`;
    const scope = scopeAt(org, { kind: 'key', id: 'lin_free', code: 'key_budget', limit: null, blocking: false, period: 'never', ledger: { column: 'lineage_id', value: 'lin_free' } }, new Date(), 1);
    const p = apiProcess();
    const leased = { count: 0 };
    // Calls outliving several steps (every 50 ms here): their spend is not dropped with an idle step.
    const calls = [request(p, [scope], 'free_0', 0.3, 0.25, 300, leased), request(p, [scope], 'free_1', 0.3, 0.5, 300, leased)];
    // Steps run while they are in flight, and neither add nor hold anything: the window is not made.
    await sleep(150);
    expect(await redis.redis.exists(windowKeys(scope)[0])).toBe(0);
    expect(await redis.redis.exists(windowKeys(scope)[1])).toBe(0);
    await Promise.all(calls);
    expect(leased.count).toBe(2);
    expect(await p.spend.spent([scope])).toEqual([0.75]);
    expect((await windowFigures(scope)).held).toBe(0);
  });

  it('counts a cost once when its ledger row lands before the step that finds its window missing', async () => {
    const org = `org_leaselanded${Date.now().toString(36)}${onCluster ? 'c' : ''}`;
    await database.db.insert(organizations).values({ id: org, name: 'lease landed' });
    const scope = scopeAt(org, { kind: 'key', id: 'lin_landed', code: 'key_budget', limit: null, blocking: false, period: 'never', ledger: { column: 'lineage_id', value: 'lin_landed' } }, new Date(), 1);
    // Steps only when asked: the row lands first, as when the writers flush before the next step.
    const p = apiProcess(rowsKept(), 60_000);
    await request(p, [scope], 'landed_0', 0, 0.5, 0, { count: 0 });
    expect(p.rows.rows).toHaveLength(1);
    await database.db.insert(spendLedger).values(p.rows.rows.map((r) => Object.assign({}, r, { id: `${r.id}_${org}`, lineageId: 'lin_landed' })));
    expect(await redis.redis.exists(windowKeys(scope)[0])).toBe(0);
    expect(await p.spend.spent([scope])).toEqual([0.5]);
  });

  it('counts a cost once when it settles while the step that finds its window missing is in flight, and its row lands first', async () => {
    const org = `org_leasenext${Date.now().toString(36)}${onCluster ? 'c' : ''}`;
    await database.db.insert(organizations).values({ id: org, name: 'lease next' });
    const scope = scopeAt(org, { kind: 'key', id: 'lin_next', code: 'key_budget', limit: null, blocking: false, period: 'never', ledger: { column: 'lineage_id', value: 'lin_next' } }, new Date(), 1);
    const rows = rowsKept();
    const landed = new Set<string>();
    // Every row recorded so far lands in Postgres just before the step rebuilds the window.
    const landFirst = (upkeep: SpendUpkeep): SpendUpkeep => Object.assign({}, upkeep, {
      async seedMissing(scopes: SpendScope[], options?: { excludeLeaseRefs?: string[] }) {
        const fresh = rows.rows.filter((r) => !landed.has(r.id));
        fresh.forEach((r) => landed.add(r.id));
        if (fresh.length > 0) await database.db.insert(spendLedger).values(fresh.map((r) => Object.assign({}, r, { id: `${r.id}_${org}`, lineageId: 'lin_next' })));
        return upkeep.seedMissing(scopes, options);
      },
    });
    const p = apiProcess(rows, 60_000, landFirst);
    await request(p, [scope], 'next_0', 0, 0.5, 0, { count: 0 });
    // A second request settles once the step is sent: its cost is the next step's to add.
    const second = await p.spend.reserve({ holdId: 'next_1', scopes: [scope], amount: 0, leaseMs: 60_000, now: new Date(), lapseRow: rowOf(org, 'lin', 'next_1'), leasable: true });
    const read = p.spend.spent([scope]);
    await p.spend.settle(second, 0.25, rowOf(org, 'lin', 'next_1'));
    expect(rows.rows.map((r) => r.leaseRef?.replace(/^.*#/, '#'))).toEqual(['#0', '#1']);
    expect(await read).toEqual([0.5]);
    expect(await p.spend.spent([scope])).toEqual([0.75]);
  });

  it('holds exactly near the limit, and gives an idle lease back within a second', async () => {
    const org = `org_leaseidle${Date.now().toString(36)}`;
    const scope = keyScope(org, 'lin_idle', 1);
    await seedWindow(redis.redis, scope, 0n);
    const [a] = [apiProcess()];
    const leased = { count: 0 };
    for (let i = 0; i < 40; i++) await request(a, [scope], `idle${i}`, 0.001, 0.001, 1, leased);
    expect(leased.count).toBeGreaterThan(0);
    expect((await windowFigures(scope)).held).toBeGreaterThan(0);
    await sleep(1000);
    expect(await windowFigures(scope)).toEqual({ settled: toNanos(0.04), held: 0 });
    // A window with room for under four worst cases is not leased: every request holds exactly.
    const tight = keyScope(org, 'lin_tight', 0.1);
    await seedWindow(redis.redis, tight, BigInt(toNanos(0.07)));
    const tightLeased = { count: 0 };
    for (let i = 0; i < 10; i++) await request(a, [tight], `tight${i}`, 0.01, 0.001, 1, tightLeased);
    await sleep(120);
    for (let i = 0; i < 10; i++) await request(a, [tight], `tight2_${i}`, 0.01, 0.001, 1, tightLeased);
    expect(tightLeased.count).toBe(0);
  }, 30_000);

  it('caps all leases of one window together: a project\'s 8 keys in 2 processes hold at most a quarter of its room', async () => {
    const org = `org_leaseall${Date.now().toString(36)}`;
    // The window every key's requests also count in (a project's, say), and eight keys of their own.
    const shared = keyScope(org, 'lin_project', 10);
    const keys = Array.from({ length: 8 }, (_, i) => keyScope(org, `lin_key${i}`, 1000));
    await Promise.all([shared, ...keys].map((scope) => seedWindow(redis.redis, scope, 0n)));
    const processes = [apiProcess(), apiProcess()];
    const leased = { count: 0 };
    const worst = 0.01;
    let mostOver = -Infinity;
    let running = true;
    const watch = (async () => {
      while (running) {
        // Held = the leases + exact holds of requests in flight (at most one per key and process).
        const { settled, held } = await windowFigures(shared);
        mostOver = Math.max(mostOver, held - 0.25 * (toNanos(10) - settled) - 16 * toNanos(worst));
        await sleep(10);
      }
    })();
    await Promise.all(processes.flatMap((p, pi) => keys.map(async (key, ki) => {
      for (let i = 0; i < 60; i++) await request(p, [key, shared], `all${pi}.${ki}.${i}`, worst, 0.001, 4, leased);
    })));
    running = false;
    await watch;
    expect(leased.count).toBeGreaterThan(100);
    expect(mostOver).toBeLessThanOrEqual(0);
    // Given back once idle: the window's lease total comes back to nothing with its held total.
    await sleep(1500);
    expect(await windowFigures(shared)).toEqual({ settled: toNanos(0.96), held: 0 });
    expect(Number(await redis.redis.get(windowKeys(shared)[1].replace(/:h$/, ':l')))).toBe(0);
  }, 30_000);

  it('keeps the ceiling when the limit is lowered while leases are out', async () => {
    const org = `org_leaselow${Date.now().toString(36)}`;
    const before = keyScope(org, 'lin_low', 10);
    await seedWindow(redis.redis, before, 0n);
    // Steps a second apart: what is given back here is given back by the limit change, not by a tick.
    const procs = [apiProcess(rowsKept(), 1000), apiProcess(rowsKept(), 1000), apiProcess(rowsKept(), 1000)];
    const leased = { count: 0 };
    let i = 0;
    // Leases form in every process...
    for (let round = 0; round < 30; round++) await Promise.all(procs.map((p) => request(p, [before], `low${i++}`, 0.01, 0.005, 1, leased)));
    await Promise.all(procs.map((p) => p.leases.flush()));
    for (let round = 0; round < 10; round++) await Promise.all(procs.map((p) => request(p, [before], `low${i++}`, 0.01, 0.005, 1, leased)));
    expect((await windowFigures(before)).held).toBeGreaterThan(0);
    // ...then the limit is lowered to what is spent plus $0.30: each process now sees the new limit.
    await Promise.all(procs.map((p) => p.leases.flush()));
    const spentSoFar = (await windowFigures(before)).settled;
    const lowered = keyScope(org, 'lin_low', (spentSoFar + toNanos(0.3)) / 1e9);
    let admitted = spentSoFar;
    // Each process gives back the lease it sized under the old limit as soon as it sees the new
    // one, not at its next step: what stays held is at most the new leases, a tenth of the room.
    const first = await Promise.all(procs.map((p) => request(p, [lowered], `low${i++}`, 0.01, 0.005, 1, leased)));
    admitted += first.reduce<number>((sum, s) => sum + (s === null ? 0 : toNanos(s)), 0);
    for (let waited = 0; (await windowFigures(lowered)).held > toNanos(0.1) && waited < 300; waited += 10) await sleep(10);
    expect((await windowFigures(lowered)).held).toBeLessThanOrEqual(toNanos(0.1));
    for (let round = 0; round < 60; round++) {
      const spent = await Promise.all(procs.map((p) => request(p, [lowered], `low${i++}`, 0.01, 0.005, 1, leased)));
      admitted += spent.reduce<number>((sum, s) => sum + (s === null ? 0 : toNanos(s)), 0);
    }
    await Promise.all(procs.map((p) => p.leases.close()));
    const { settled, held } = await windowFigures(lowered);
    expect(held).toBe(0);
    expect(settled).toBe(admitted);
    expect(settled).toBeLessThanOrEqual(lowered.limitNanos!);
    expect(settled).toBeGreaterThan(lowered.limitNanos! - toNanos(0.05));
  }, 30_000);

  it('starts afresh when the period resets while leases are out: the old window\'s lease does not cover the new one', async () => {
    const org = `org_leasereset${Date.now().toString(36)}`;
    const day1 = new Date('2026-11-26T23:59:59.500Z');
    const day2 = new Date('2026-11-27T00:00:00.500Z');
    const daily = (now: Date) => scopeAt(org, { kind: 'key', id: 'lin_day', code: 'key_budget', limit: 1, blocking: true, period: 'daily', ledger: { column: 'lineage_id', value: 'lin_day' } }, now, 1);
    const [old, fresh] = [daily(day1), daily(day2)];
    expect(old.window).not.toBe(fresh.window);
    await seedWindow(redis.redis, old, 0n);
    await seedWindow(redis.redis, fresh, 0n);
    const p = apiProcess();
    const leased = { count: 0 };
    for (let i = 0; i < 30; i++) await request(p, [old], `d1_${i}`, 0.01, 0.01, 0, leased);
    await sleep(120);
    for (let i = 0; i < 20; i++) await request(p, [old], `d1b_${i}`, 0.01, 0.01, 0, leased);
    expect((await windowFigures(old)).held).toBeGreaterThan(0);
    // The first request of the new day finds no lease there: it holds exactly, in the new window.
    const counted = { count: 0 };
    await request(p, [fresh], 'd2_0', 0.01, 0.01, 0, counted);
    expect(counted.count).toBe(0);
    expect((await windowFigures(fresh)).settled).toBe(toNanos(0.01));
    await p.leases.close();
    expect(await windowFigures(old)).toEqual({ settled: toNanos(0.5), held: 0 });
  }, 30_000);

  it('rebuilds a missing window once for every request waiting on it in the process', async () => {
    const org = `org_leaseseed${Date.now().toString(36)}`;
    const scope = keyScope(org, 'lin_seed', 50);
    let selects = 0;
    const counted = new Proxy(database.db, {
      get(target, name, receiver) {
        if (name === 'select') selects++;
        return Reflect.get(target, name, receiver) as unknown;
      },
    });
    const upkeep = createSpendUpkeep({ db: counted, redis, rows: rowsKept() });
    await Promise.all(Array.from({ length: 20 }, () => upkeep.seedMissing([scope])));
    const once = selects;
    // The rebuild reads the ledger's total (each row counted once, lapses with what they cover) and running jobs' holds: 2 queries, not 40.
    expect(once).toBe(2);
    expect(await windowFigures(scope)).toEqual({ settled: 0, held: 0 });
    // Done, it is not kept: a window lost later is rebuilt again.
    await upkeep.seedMissing([scope]);
    expect(selects).toBe(2 * once);
  });

  it('gives a lease granted after a slow step (its window rebuilt from Postgres first) its full time to live from the grant', async () => {
    const org = `org_leaseslow${Date.now().toString(36)}`;
    // No window in Redis yet: the step finds it missing and rebuilds it, slowly (a busy Postgres).
    const scope = keyScope(org, 'lin_slow', 50);
    const deps = { db: database.db, redis, rows: rowsKept() };
    const upkeep = createSpendUpkeep(deps);
    const slowUpkeep = Object.assign({}, upkeep, { seedMissing: async (scopes: SpendScope[]) => (await sleep(3_300), upkeep.seedMissing(scopes)) });
    const leases = createSpendLeases({ redis, upkeep: slowUpkeep, stepMs: 60_000 });
    processes.push(leases);
    for (let i = 0; i < 5; i++) expect(leases.draw([scope], toNanos(0.01), rowOf(org, 'lin_slow', `slow${i}`))).toBeNull();
    await leases.flush(org);
    expect((await windowFigures(scope)).held).toBeGreaterThan(0);
    // Another process sweeping now finds nothing lapsed: the lease is this process's, and alive.
    const rows = rowsKept();
    await createSpendUpkeep({ db: database.db, redis, rows }).recordLapsed(org, new Date());
    expect(rows.rows).toEqual([]);
    expect((await windowFigures(scope)).settled).toBe(0);
  }, 30_000);

  // Issue 54, item 7: a live process stalled past its lease's time was charged the lease in full
  // (swept as lapsed) and then its requests in flight again as they ended.
  it('counts once a stalled process\'s requests in flight: the lapse of its swept lease covers them', async () => {
    const org = `org_leasestall${Date.now().toString(36)}`;
    const scope = keyScope(org, 'lin_stall', 50);
    await seedWindow(redis.redis, scope, 0n);
    const deps = { db: database.db, redis, rows: rowsKept() };
    // Steps only when told (the stall): the lease is not renewed on its own.
    const leases = createSpendLeases({ redis, upkeep: createSpendUpkeep(deps), stepMs: 600_000 });
    processes.push(leases);
    const row = rowOf(org, 'lin_stall', 'stall');
    for (let i = 0; i < 3; i++) expect(leases.draw([scope], toNanos(0.01), row)).toBeNull();
    await leases.flush(org);
    const draw = leases.draw([scope], toNanos(0.01), row)!;
    expect(draw).not.toBeNull();
    const granted = (await windowFigures(scope)).held;
    expect(granted).toBeGreaterThanOrEqual(toNanos(0.01));
    // Past the lease's time another process sweeps it: settled in full, the request in flight with it.
    await sleep(3_200);
    const swept = rowsKept();
    await createSpendUpkeep({ db: database.db, redis, rows: swept }).recordLapsed(org, new Date());
    expect(swept.rows).toHaveLength(1);
    expect(await windowFigures(scope)).toEqual({ settled: granted, held: 0 });
    // The stalled process wakes: its step learns of the sweep; then its request ends.
    await leases.flush(org);
    const ref = leases.end(draw, toNanos(0.004));
    await leases.flush(org);
    // Counted once, by the lapse; the request's row names the lapse's step, so a rebuild counts the two as their larger.
    expect((await windowFigures(scope)).settled).toBe(granted);
    expect(ref).toBe(swept.rows[0]!.leaseRef);
  }, 30_000);

  it('counts a killed process\'s lease as spent in full when it lapses, with a ledger row saying so', async () => {
    const org = `org_leasekill${Date.now().toString(36)}`;
    const lineage = 'lin_kill';
    const scope = keyScope(org, lineage, 50);
    await seedWindow(redis.redis, scope, 0n);
    const child = spawn(globalThis.process.execPath, ['--import', 'tsx', path.resolve(__dirname, '../helpers/lease-holder.ts')], {
      env: { ...globalThis.process.env, ...(cluster && { REDIS_URL: cluster.url }), LEASE_ORG: org, LEASE_LINEAGE: lineage, LEASE_LIMIT: '50' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`lease holder exited with ${code}`)));
    });
    const said = JSON.parse(line) as { leaseId: string; inFlightLeased: boolean; settledRows: number };
    expect(said.inFlightLeased).toBe(true);
    await sleep(120);
    child.kill('SIGKILL');
    await exited;
    // What the dead process left: its lease, held, and the spend it flushed before it died.
    const [, held, , amounts] = windowKeys(scope);
    const leaseTotal = held.replace(/:h$/, ':l');
    const leaseNanos = Number(await redis.redis.hget(amounts, said.leaseId));
    const before = await windowFigures(scope);
    expect(leaseNanos).toBeGreaterThanOrEqual(toNanos(0.01));
    expect(before.held).toBe(leaseNanos);
    expect(Number(await redis.redis.get(leaseTotal))).toBe(leaseNanos);
    // Past its expiry the lease lapses: settled in full, recorded in the ledger.
    await sleep(3_200);
    const rows = rowsKept();
    await createSpendUpkeep({ db: database.db, redis, rows }).recordLapsed(org, new Date());
    expect(rows.rows).toEqual([expect.objectContaining({ orgId: org, lineageId: lineage, requestId: said.leaseId, state: 'settled', amount: leaseNanos / 1e9 })]);
    const after = await windowFigures(scope);
    expect(after).toEqual({ settled: before.settled + leaseNanos, held: 0 });
    expect(Number(await redis.redis.get(leaseTotal))).toBe(0);
    // Never an under-count: every cost the process settled, and the call it had in flight at its worst case, are counted.
    expect(after.settled).toBeGreaterThanOrEqual(toNanos(0.01) * (said.settledRows + 1));
  }, 60_000);

  it('rebuilds a window counting a lapsed lease and the rows that landed under its last step once: the larger of the two', async () => {
    const org = `org_leaserebuild${Date.now().toString(36)}${onCluster ? 'c' : ''}`;
    await database.db.insert(organizations).values({ id: org, name: 'lease rebuild' });
    const at = new Date();
    const row = (id: string, amount: number, requestId: string, leaseRef: string | null) => ({
      id: `spend_${org}_${id}`, orgId: org, lineageId: 'lin_rebuild', projectId: 'proj_t', requestId, leaseRef, amount, state: 'settled' as const, createdAt: at, updatedAt: at,
    });
    await database.db.insert(spendLedger).values([
      row('plain', 0.5, 'req_plain', null),
      // Flushed by step 4 (settled under step 3): not what the lapse covered.
      row('flushed', 0.07, 'req_flushed', 'lease:p:1#3'),
      // Lapsed at $0.30 after step 4; $0.15 of what it covered landed.
      row('lapse1', 0.3, 'lease:p:1', 'lease:p:1#4'),
      row('covered1', 0.1, 'req_c1', 'lease:p:1#4'),
      row('covered2', 0.05, 'req_c2', 'lease:p:1#4'),
      // Lapsed at $0.10, while $0.25 under it landed (it grew past the lease by a request's actual cost).
      row('lapse2', 0.1, 'lease:p:2', 'lease:p:2#9'),
      row('covered3', 0.25, 'req_c3', 'lease:p:2#9'),
    ]);
    const scope = keyScope(org, 'lin_rebuild', 100);
    expect(await ledgerWindowTotal(database.db, scope)).toBe(BigInt(toNanos(0.5 + 0.07 + 0.3 + 0.25)));
  });
});
