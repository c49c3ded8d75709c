import { spawn, type ChildProcess } from 'node:child_process';
import { eq } from 'drizzle-orm';
import Redis from 'ioredis';
import { freePort } from '../../scripts/lib/ports';
import { createBatchWriter } from '../../core/db/batch-writer';
import { spendLedger } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import { createLogger } from '../../core/logger';
import { windowKeys } from '../../core/spend/holds';
import { endJobHold } from '../../core/spend/job-spend';
import { createSpendLedger, JOB_HOLD_LEASE_MS, CHAT_HOLD_LEASE_MS } from '../../core/spend/ledger';
import { scopeAt, type SpendScope } from '../../core/spend/scopes';
import { checkSpendRedis } from '../../core/spend/spend-redis';
import { testDatabase, testRedis } from '../helpers/harness';
import { createTenant, type Tenant } from '../helpers/tenants';

/**
 * Issue 33 item 11: every counter a reservation reads can be lost (evicted, flushed, a Redis
 * restart) and the limit stays an exact ceiling. A key's $1.00 monthly limit with $0.30 settled
 * and a running job holding $0.40: after each loss $0.29 more fits and $0.31 does not.
 */
describe('spend counters lost from Redis', () => {
  const database = testDatabase();
  const redis = testRedis();
  const rows = createBatchWriter(database.db, spendLedger, createLogger('silent'), 'ledger', { flushMs: 10 });
  const spend = createSpendLedger({ db: database.db, redis, rows });
  let tenant: Tenant;
  beforeAll(async () => {
    tenant = await createTenant(database.db);
  });
  afterAll(async () => {
    await rows.close();
    await Promise.all([database.close(), redis.close()]);
  });

  /** A fresh window (its own lineage): $0.30 settled in the ledger, a job holding $0.40. */
  async function windowWithRunningJob(): Promise<{ scope: SpendScope; jobId: string }> {
    const lineage = newId('key');
    const now = new Date();
    const scope = scopeAt(tenant.orgId, { kind: 'key', id: lineage, code: 'key_budget', limit: 1, blocking: true, period: 'monthly', ledger: { column: 'lineage_id', value: lineage } }, now, 1);
    await database.db.insert(spendLedger).values({ id: newId('spend'), orgId: tenant.orgId, lineageId: lineage, projectId: tenant.projectId, amount: 0.3, state: 'settled', createdAt: now, updatedAt: now });
    const jobId = newId('job');
    await spend.reserve({ holdId: jobId, scopes: [scope], amount: 0.4, leaseMs: JOB_HOLD_LEASE_MS, now });
    const { orgId, scope: name, window, limitNanos, ttlSeconds } = scope;
    await database.db.insert(spendLedger).values({
      id: newId('spend'), orgId: tenant.orgId, lineageId: lineage, projectId: tenant.projectId, jobId, amount: 0.4, state: 'reserved', createdAt: now, updatedAt: now,
      holdWindows: [{ orgId, scope: name, window, limitNanos, ttlSeconds }],
    });
    return { scope, jobId };
  }

  /** What fits now: the answers to $0.31 and $0.29 (each released again). */
  async function fits(scope: SpendScope): Promise<[boolean, boolean]> {
    const attempt = async (amount: number) => {
      try {
        const hold = await spend.reserve({ holdId: newId('req'), scopes: [scope], amount, leaseMs: CHAT_HOLD_LEASE_MS, now: new Date() });
        await spend.release(hold);
        return true;
      } catch (err) {
        if (err instanceof GatewayError && err.code === 'key_budget') return false;
        throw err;
      }
    };
    return [await attempt(0.31), await attempt(0.29)];
  }

  const [S, H, Z, A] = [0, 1, 2, 3] as const;

  it.each([
    ['the settled total', [S]],
    ['the held total', [H]],
    ['the leases', [Z]],
    ['the amounts', [A]],
    ['every key (a Redis restart or flush)', [S, H, Z, A]],
  ])('keeps the ceiling when %s is lost', async (_what, lost) => {
    const { scope } = await windowWithRunningJob();
    expect(await fits(scope)).toEqual([false, true]);
    const keys = windowKeys(scope);
    await redis.redis.del(...lost.map((i) => keys[i]));
    expect(await fits(scope)).toEqual([false, true]);
    // Amounts and leases agree again, and the held total is what the amounts say.
    const [held, leases, amounts] = await Promise.all([redis.redis.get(keys[H]), redis.redis.zcard(keys[Z]), redis.redis.hlen(keys[A])]);
    expect([held, leases, amounts]).toEqual(['400000000', 1, 1]);
  });

  it('ends a running job\'s hold after its amounts were lost, so its room comes back when it settles', async () => {
    const { scope, jobId } = await windowWithRunningJob();
    await redis.redis.del(windowKeys(scope)[A]);
    expect(await fits(scope)).toEqual([false, true]);
    await database.db.update(spendLedger).set({ state: 'settled' }).where(eq(spendLedger.jobId, jobId));
    await endJobHold(database.db, redis.redis, jobId);
    // $0.70 settled, nothing held: $0.29 fits, $0.31 does not.
    expect(await fits(scope)).toEqual([false, true]);
    expect(await redis.redis.get(windowKeys(scope)[H])).toBe('0');
  });

  it('records a chat hold whose process died, when its lease passes, at the hold\'s amount, once (issue 33 item 10)', async () => {
    const lineage = newId('key');
    const now = new Date();
    const scope = scopeAt(tenant.orgId, { kind: 'key', id: lineage, code: 'key_budget', limit: 1, blocking: true, period: 'monthly', ledger: { column: 'lineage_id', value: lineage } }, now, 1);
    const requestId = newId('req');
    const lapseRow = { id: newId('spend'), orgId: tenant.orgId, lineageId: lineage, projectId: tenant.projectId, memberId: null, endUserId: null, endUserScope: null, requestId, createdAt: now, updatedAt: now, provider: null, model: null };
    // A call holds $0.50 and its process dies: nothing settles it, its lease (50 ms here) passes.
    const lapsing = await spend.reserve({ holdId: requestId, scopes: [scope], amount: 0.5, leaseMs: 50, now, lapseRow });
    await new Promise((r) => setTimeout(r, 120));
    // The next reservation in the organization finds it lapsed and records it.
    const next = await spend.reserve({ holdId: newId('req'), scopes: [scope], amount: 0.1, leaseMs: CHAT_HOLD_LEASE_MS, now: new Date() });
    const recorded = async () => {
      await rows.flush();
      return database.db.select().from(spendLedger).where(eq(spendLedger.requestId, requestId));
    };
    const deadline = Date.now() + 5_000;
    let found = await recorded();
    while (found.length === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      found = await recorded();
    }
    expect(found.map((r) => [r.state, r.amount, r.lineageId])).toEqual([['settled', 0.5, lineage]]);
    expect(await redis.redis.get(windowKeys(scope)[S])).toBe('500000000');
    // The call was alive after all and settles late: the swept row stands, nothing is added twice.
    await spend.settle(lapsing, 0.2, { ...lapseRow, id: newId('spend') });
    expect(await redis.redis.get(windowKeys(scope)[S])).toBe('500000000');
    expect((await recorded()).map((r) => r.amount)).toEqual([0.5]);
    // Once: later reservations record nothing more, and what is held is the live call's $0.10.
    await spend.release(next);
    await spend.reserve({ holdId: newId('req'), scopes: [scope], amount: 0.1, leaseMs: CHAT_HOLD_LEASE_MS, now: new Date() });
    await new Promise((r) => setTimeout(r, 100));
    expect(await recorded()).toHaveLength(1);
    expect(await redis.redis.get(windowKeys(scope)[H])).toBe('100000000');
  });

  describe('a Redis that evicts', () => {
    let server: ChildProcess;
    let evicting: Redis;
    beforeAll(async () => {
      const port = await freePort();
      server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'allkeys-lru'], { stdio: 'ignore' });
      evicting = new Redis({ port, host: '127.0.0.1', retryStrategy: (n) => (n > 100 ? null : 100) });
      evicting.on('error', () => undefined);
      await new Promise((ready) => evicting.once('ready', ready));
    });
    afterAll(async () => {
      evicting?.disconnect();
      server?.kill();
    });

    it('is refused at start-up in one line naming the policy and the ways out; a noeviction one is taken', async () => {
      await expect(checkSpendRedis(evicting, {})).rejects.toThrow(/REDIS_URL evicts keys \(maxmemory-policy allkeys-lru\).*noeviction.*SPEND_REDIS_URL/);
      await expect(checkSpendRedis(evicting, { SPEND_REDIS_URL: 'redis://spend' })).rejects.toThrow(/^the Redis at SPEND_REDIS_URL evicts keys/);
      await expect(checkSpendRedis(redis.redis, {})).resolves.toBeUndefined();
    });
  });
});
