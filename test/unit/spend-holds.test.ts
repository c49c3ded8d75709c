import { holdSpend, repairWindow, settleHold, seedWindow, stepLease, sweepLapsedHolds, windowKeys, type LeaseStep, type ScopeWindow } from '../../core/spend/holds';
import { testRedis } from '../helpers/harness';

/** The reservation script on the real Redis: one round trip counts the rate and holds the spend. */
describe('spend holds (core/spend/holds.ts)', () => {
  const redis = testRedis();
  const org = `org_holds${Date.now().toString(36)}`;
  const window = (scope: string, limitNanos: number | null): ScopeWindow => ({ orgId: org, scope, window: 'lifetime', limitNanos, ttlSeconds: 0 });
  const now = new Date();
  const lease = new Date(now.getTime() + 60_000);
  afterAll(() => redis.close());

  it('holds in every scope only when each blocking one has room, and settles to the actual cost', async () => {
    const key = window('key:a', 1000);
    const project = window('project:p', null);
    expect(await holdSpend(redis.redis, 'h1', [key, project], 600, now, lease)).toMatchObject({ state: 'missing' });
    await seedWindow(redis.redis, key, 0n);
    await seedWindow(redis.redis, project, 0n);
    expect(await holdSpend(redis.redis, 'h1', [key, project], 600, now, lease)).toMatchObject({ state: 'ok' });
    const refused = await holdSpend(redis.redis, 'h2', [key, project], 500, now, lease);
    expect(refused).toMatchObject({ state: 'refused', window: { scope: 'key:a' }, usedNanos: 600 });
    // Nothing was held anywhere by the refused request.
    expect(await redis.redis.get(windowKeys(project)[1])).toBe('600');
    await settleHold(redis.redis, 'h1', [key, project], 250);
    expect(await redis.redis.mget(windowKeys(key)[0], windowKeys(key)[1], windowKeys(project)[0])).toEqual(['250', '0', '250']);
    expect(await holdSpend(redis.redis, 'h3', [key], 750, now, lease)).toMatchObject({ state: 'ok' });
  });

  it('holds and settles once per hold id: a retried step changes nothing; a new hold after a settle settles anew', async () => {
    const key = window('key:once', 1000);
    await seedWindow(redis.redis, key, 0n);
    expect(await holdSpend(redis.redis, 'job', [key], 300, now, lease)).toMatchObject({ state: 'ok' });
    expect(await holdSpend(redis.redis, 'job', [key], 300, now, lease)).toMatchObject({ state: 'ok' });
    expect(await redis.redis.get(windowKeys(key)[1])).toBe('300');
    expect(await settleHold(redis.redis, 'job', [key], 100)).toEqual([100]);
    expect(await settleHold(redis.redis, 'job', [key], 100)).toEqual([null]);
    expect(await redis.redis.mget(windowKeys(key)[0], windowKeys(key)[1])).toEqual(['100', '0']);
    // Released, then held again under the same id (a job resumed after its start failed).
    expect(await holdSpend(redis.redis, 'job', [key], 200, now, lease)).toMatchObject({ state: 'ok' });
    expect(await settleHold(redis.redis, 'job', [key], 200)).toEqual([300]);
  });

  it('keeps amounts exact as integers beyond what Lua numbers print plainly', async () => {
    const key = window('key:big', null);
    await seedWindow(redis.redis, key, 0n);
    const big = 2e17;
    expect(await holdSpend(redis.redis, 'big', [key], big, now, lease)).toMatchObject({ state: 'ok' });
    await settleHold(redis.redis, 'big', [key], big);
    expect(await redis.redis.get(windowKeys(key)[0])).toBe('200000000000000000');
  });

  it('drops a hold whose lease has passed, so a dead instance cannot keep room forever', async () => {
    const key = window('key:lease', 100);
    await seedWindow(redis.redis, key, 0n);
    expect(await holdSpend(redis.redis, 'dead', [key], 100, now, new Date(now.getTime() + 10))).toMatchObject({ state: 'ok' });
    expect(await holdSpend(redis.redis, 'next', [key], 100, now, lease)).toMatchObject({ state: 'refused' });
    expect(await holdSpend(redis.redis, 'next', [key], 100, new Date(now.getTime() + 20), lease)).toMatchObject({ state: 'ok' });
  });

  // Issue 54, item 2: a registered hold (a chat call's, a process's lease) whose lease passed is
  // an instance that may have died with its calls billed. Its room is not free until the sweep
  // has moved its amount to the settled counter, in the same script that drops it.
  it('keeps a lapsed registered hold\'s amount held until the sweep settles it: its room is never reused in between', async () => {
    const key = window('key:lapse', 100);
    await seedWindow(redis.redis, key, 0n);
    const soon = new Date(now.getTime() + 10);
    const later = new Date(now.getTime() + 20);
    expect(await holdSpend(redis.redis, 'dead_call', [key], 80, now, soon, undefined, { requestId: 'dead_call' })).toMatchObject({ state: 'ok' });
    // Its lease passed: the next reservation is told of the lapse, and does not get its room.
    expect(await holdSpend(redis.redis, 'next', [key], 50, later, lease)).toMatchObject({ state: 'refused', usedNanos: 80, lapsed: true });
    expect(await redis.redis.mget(windowKeys(key)[0], windowKeys(key)[1])).toEqual(['0', '80']);
    expect(await sweepLapsedHolds(redis.redis, org, later)).toEqual([{ nanos: 80, row: { requestId: 'dead_call' } }]);
    expect(await redis.redis.mget(windowKeys(key)[0], windowKeys(key)[1])).toEqual(['80', '0']);
    expect(await holdSpend(redis.redis, 'next', [key], 21, later, lease)).toMatchObject({ state: 'refused', usedNanos: 80 });
    expect(await holdSpend(redis.redis, 'next', [key], 20, later, lease)).toMatchObject({ state: 'ok' });
  });

  it('gives a lease step no room from another process\'s lapsed lease before the sweep settles it', async () => {
    const key = window('key:leaselapse', 100);
    await seedWindow(redis.redis, key, 0n);
    const step = (leaseId: string, floorNanos: number, spareNanos: number, expires: Date): LeaseStep => ({
      leaseId, spentNanos: 0, floorNanos, spareNanos, leastRoomNanos: 0, shareOfRoom: 1, allLeasesShareOfRoom: 1, held: false, leaseExpiresAt: expires, lapseRecord: { requestId: leaseId },
    });
    // Process A holds 60 in flight, then dies: its lease passes at +10 ms.
    expect(await stepLease(redis.redis, [key], step('lease:a', 60, 0, new Date(now.getTime() + 10)), now)).toMatchObject({ state: 'ok', grantedNanos: 60 });
    // Process B asks for 90 of spare room at +20 ms: only the 40 beside A's 60 is there.
    const b = await stepLease(redis.redis, [key], step('lease:b', 0, 90, lease), new Date(now.getTime() + 20));
    expect(b).toMatchObject({ state: 'ok', grantedNanos: 40, lapsed: true });
    expect(await sweepLapsedHolds(redis.redis, org, new Date(now.getTime() + 20))).toEqual([{ nanos: 60, row: { requestId: 'lease:a' } }]);
    expect(await redis.redis.mget(windowKeys(key)[0], windowKeys(key)[1])).toEqual(['60', '40']);
  });

  // Issue 54, item 7: a step whose lease went with its window (Redis lost it, the window was
  // rebuilt from Postgres) took it for swept as lapsed and dropped the spend it was bringing.
  it('tells a lease swept as lapsed from one lost with its window: only the first drops what its step brings', async () => {
    const key = window('key:leaserebuilt', 1000);
    await seedWindow(redis.redis, key, 0n);
    const step = (leaseId: string, spentNanos: number, held: boolean, expires: Date): LeaseStep => ({
      leaseId, spentNanos, floorNanos: 10, spareNanos: 0, leastRoomNanos: 0, shareOfRoom: 1, allLeasesShareOfRoom: 1, held, leaseExpiresAt: expires, lapseRecord: { requestId: leaseId },
    });
    expect(await stepLease(redis.redis, [key], step('lease:r', 0, false, lease), now)).toMatchObject({ state: 'ok', grantedNanos: 10 });
    // Redis loses the window; it is rebuilt from the ledger, which has 100 settled.
    await redis.redis.del(...windowKeys(key));
    await seedWindow(redis.redis, key, 100n);
    expect(await stepLease(redis.redis, [key], step('lease:r', 25, true, lease), now)).toMatchObject({ state: 'ok', grantedNanos: 10 });
    expect(await redis.redis.get(windowKeys(key)[0])).toBe('125');
    // A lease that lapsed and was swept is settled in full: its step is told so.
    expect(await stepLease(redis.redis, [key], step('lease:q', 0, false, new Date(now.getTime() + 10)), now)).toMatchObject({ state: 'ok' });
    const later = new Date(now.getTime() + 20);
    expect((await sweepLapsedHolds(redis.redis, org, later)).map((s) => s.row)).toEqual([{ requestId: 'lease:q' }]);
    expect(await stepLease(redis.redis, [key], step('lease:q', 5, true, lease), later)).toEqual({ state: 'swept' });
  });

  it('repairs a lost window\'s held total and its leases\' part of it from the amounts', async () => {
    const key = window('key:repair', 1000);
    const [s, h, z, a] = windowKeys(key);
    const leases = h.replace(/:h$/, ':l');
    await redis.redis.hset(a, 'lease:p1:1', '300', 'req_1', '50', 'lease:p2:4', '25');
    await redis.redis.zadd(z, lease.getTime(), 'lease:p1:1', lease.getTime(), 'req_1', lease.getTime(), 'lease:p2:4');
    await repairWindow(redis.redis, key, 40n, [], lease);
    expect(await redis.redis.mget(s, h, leases)).toEqual(['40', '375', '325']);
  });

  it('counts the key\'s rate window in the same step; past the tier nothing is held', async () => {
    const key = window('key:rate', 1_000_000);
    await seedWindow(redis.redis, key, 0n);
    const rate = { key: `key-rpm:{${org}}:lineage`, windowMs: 60_000, limit: 2 };
    expect(await holdSpend(redis.redis, 'r1', [key], 10, now, lease, rate)).toMatchObject({ state: 'ok', rate: { count: 1 } });
    expect(await holdSpend(redis.redis, 'r2', [key], 10, now, lease, rate)).toMatchObject({ state: 'ok', rate: { count: 2 } });
    const third = await holdSpend(redis.redis, 'r3', [key], 10, now, lease, rate);
    expect(third).toMatchObject({ state: 'rate_limited', rate: { count: 3 } });
    expect(third.rate!.resetInMs).toBeGreaterThan(0);
    expect(await redis.redis.get(windowKeys(key)[1])).toBe('20');
  });
});
