import { countInWindow } from '../../core/ratelimit/fixed-window';
import { createRateLeases, type RateLeases, type RateWindow } from '../../core/ratelimit/rate-leases';
import { connectRedis, type RedisHandle } from '../../core/redis';
import { testRedis } from '../helpers/harness';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The per-minute count leased per process (issue 37, rule 6) on the real Redis: several
 * processes counting one key's window at once never serve past its tier, the slots they did not
 * use go back, and the window's reset is the counter's own.
 */
describe.each([['one Redis', false], ['a three-master Redis Cluster', true]] as const)('rate leases (core/ratelimit/rate-leases.ts) on %s', (_, onCluster) => {
  let redis: RedisHandle;
  let cluster: RedisCluster | null = null;
  const processes: RateLeases[] = [];
  beforeAll(async () => {
    cluster = onCluster ? await startRedisCluster() : null;
    redis = cluster ? connectRedis(cluster.url, process.env.REDIS_KEY_PREFIX!) : testRedis();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.close()));
    await redis.close();
    await cluster?.stop();
  });
  const rateProcess = () => {
    const p = createRateLeases({ redis, stepMs: 50 });
    processes.push(p);
    return p;
  };

  /** One request as the gateway counts it: from the block, else in Redis. Served when within the tier. */
  async function count(p: RateLeases, window: RateWindow, local: { count: number }): Promise<{ served: boolean; resetInMs: number }> {
    const taken = p.take(window, Date.now());
    if (taken) local.count += 1;
    const counted = taken ?? (await countInWindow(redis.redis, window.key, window.windowMs));
    return { served: counted.count <= window.limit, resetInMs: counted.resetInMs };
  }

  it('never serves past the tier with several processes counting at once, and gives unused slots back', async () => {
    const window: RateWindow = { key: `key-rpm:{org_rl}:lin_${Date.now().toString(36)}`, windowMs: 60_000, limit: 3000 };
    const procs = [rateProcess(), rateProcess(), rateProcess()];
    const local = { count: 0 };
    let served = 0;
    await Promise.all(procs.flatMap((p) => Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 400; i++) {
        if ((await count(p, window, local)).served) served += 1;
        if (i % 10 === 0) await sleep(1);
      }
    })));
    // Never past the tier; short of it only by slots given back after others passed it.
    expect(served).toBeLessThanOrEqual(3000);
    expect(served).toBeGreaterThan(2900);
    // Most were counted without Redis.
    expect(local.count).toBeGreaterThan(1000);
    await Promise.all(procs.map((p) => p.close()));
    // The counter counts every request asked for (served or refused): no slot is left out in a block.
    expect(Number(await redis.redis.get(window.key))).toBe(4800);
  });

  it('counts every request in Redis while few slots are left, and answers the window\'s own reset', async () => {
    const window: RateWindow = { key: `key-rpm:{org_rl}:few_${Date.now().toString(36)}`, windowMs: 60_000, limit: 15 };
    const p = rateProcess();
    const local = { count: 0 };
    const answers = [];
    for (let i = 0; i < 20; i++) {
      answers.push(await count(p, window, local));
      await sleep(10);
    }
    expect(local.count).toBe(0);
    expect(answers.filter((a) => a.served)).toHaveLength(15);
    const ttl = await redis.redis.pttl(window.key);
    expect(Math.abs(answers.at(-1)!.resetInMs - ttl)).toBeLessThan(1000);
  });

  it('keeps the window when slots given back bring its counter to 0', async () => {
    const window: RateWindow = { key: `key-rpm:{org_rl}:back_${Date.now().toString(36)}`, windowMs: 60_000, limit: 5000 };
    const p = rateProcess();
    const local = { count: 0 };
    for (let i = 0; i < 100; i++) await count(p, window, local);
    await sleep(120);
    for (let i = 0; i < 100; i++) await count(p, window, local);
    expect(local.count).toBeGreaterThan(0);
    const ttlBefore = await redis.redis.pttl(window.key);
    await p.close();
    expect(Number(await redis.redis.get(window.key))).toBe(200);
    await redis.redis.set(window.key, '0', 'KEEPTTL');
    const again = await countInWindow(redis.redis, window.key, window.windowMs);
    expect(again.count).toBe(1);
    expect(again.resetInMs).toBeLessThanOrEqual(ttlBefore);
  });
});
