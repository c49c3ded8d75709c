import { and, eq, sql } from 'drizzle-orm';
import { Cluster } from 'ioredis';
import { spendLedger } from '../../core/db/schema';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress, startTestApi, type TestApi } from '../helpers/harness';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster';

const hello = [{ role: 'user', content: 'Say hello' }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The chat path with REDIS_URL naming a real three-master Redis Cluster (issue 37): spend held
 * and leased across two API processes, the rate tier, the response cache, and configuration
 * changes reaching every process by pub/sub. Output costs $0.10 a token, so `max_tokens: n`
 * makes a request's worst case and its cost both $0.10 × n.
 */
describe('the chat path on a three-master Redis Cluster', () => {
  let cluster: RedisCluster;
  let f: ChatFixture;
  let second: TestApi;
  const apis = () => [f.api.url, second.url];

  beforeAll(async () => {
    cluster = await startRedisCluster();
    f = await startChatFixture({ REDIS_URL: cluster.url });
    second = await startTestApi({ env: { REDIS_URL: cluster.url, GW_ALLOW_PRIVATE_NETWORK: 'true' } });
    await f.connect('openai', { name: 'cluster openai' });
    expect((await f.client.post('/model_prices', { model: 'openai/gpt-4o', provider: 'openai', input_per_million: 0, output_per_million: 100_000 })).status).toBe(201);
    await f.settle();
  }, 60_000);
  afterAll(async () => {
    await second?.close();
    await f?.close();
    await cluster?.stop();
  });

  async function ask(secret: string, tokens: number, api = f.api.url, messages = hello): Promise<{ status: number; json: Loose; headers: Headers }> {
    const res = await fetch(`${api}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages, max_tokens: tokens }),
    });
    return { status: res.status, json: (await res.json()) as Loose, headers: res.headers };
  }
  const keyInfo = async (secret: string, api = f.api.url) => (await (await fetch(`${api}/v1/key`, { headers: { authorization: `Bearer ${secret}` } })).json()) as Loose;

  it('runs on the cluster: both processes\' clients are cluster clients over three masters', async () => {
    for (const api of [f.api, second]) {
      const client = api.runtime.deps.spendRedis.redis;
      expect(client).toBeInstanceOf(Cluster);
      expect((client as Cluster).nodes('master')).toHaveLength(3);
    }
  });

  it('never lets two API processes pass a key\'s limit, leased or held exactly, and reads the spend back', async () => {
    const secret = await f.key({ credit_limit: { amount: 20, period: 'monthly' }, rate_limit_rpm: 50000 });
    let served = 0;
    // Rounds of concurrent requests on both processes until the limit refuses them.
    for (let round = 0; round < 40; round++) {
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => ask(secret, 1, apis()[i % 2])));
      for (const a of answers) {
        if (a.status === 200) served += 1;
        else expect([a.status, a.json.error?.code]).toEqual([402, 'key_budget']);
      }
      if (answers.every((a) => a.status === 402)) break;
    }
    expect(served).toBeLessThanOrEqual(200);
    expect(served).toBeGreaterThan(150);
    // Each process's settled spend reaches the cluster's counters; read from either, it adds up.
    await sleep(400);
    const [one, two] = [await keyInfo(secret, f.api.url), await keyInfo(secret, second.url)];
    expect(one.usage).toBeCloseTo(served * 0.1, 6);
    expect(two.usage).toBeCloseTo(served * 0.1, 6);
    expect(one.usage).toBeLessThanOrEqual(20);
    await sleep(800);
    const [row] = await f.database.db.select({ total: sql<string>`coalesce(sum(${spendLedger.amount}), 0)::text` }).from(spendLedger)
      .where(and(eq(spendLedger.orgId, f.tenant.orgId), eq(spendLedger.state, 'settled')));
    expect(Number(row!.total)).toBeGreaterThanOrEqual(served * 0.1 - 1e-9);
  }, 120_000);

  it('counts the rate tier across both processes: 60 of 70 on a 60-a-minute key', async () => {
    const secret = await f.key({ rate_limit_rpm: 60 });
    const answers = await Promise.all(Array.from({ length: 70 }, (_, i) => ask(secret, 1, apis()[i % 2])));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(60);
    expect(answers.filter((a) => a.status === 429)).toHaveLength(10);
  });

  it('caches answers in the cluster, and a configuration change reaches the other process by pub/sub', async () => {
    const current = await f.client.get<Loose>('/org_settings');
    expect((await f.client.patch('/org_settings', { response_cache: { enabled: true, default_ttl_seconds: 600 } }, current.etag!)).status).toBe(200);
    const secret = await f.key({ rate_limit_rpm: 100 });
    // The second process had the organization's settings cached without the cache: the change reached it.
    const messages = [{ role: 'user', content: `Say hello ${Date.now()}` }];
    let first: Awaited<ReturnType<typeof ask>> | null = null;
    for (let i = 0; i < 20 && first?.headers.get('x-gw-cache') !== 'MISS'; i++) {
      first = await ask(secret, 1, second.url, messages);
      if (first.headers.get('x-gw-cache') !== 'MISS') await sleep(100);
    }
    expect(first!.headers.get('x-gw-cache')).toBe('MISS');
    const hit = await ask(secret, 1, f.api.url, messages);
    expect(hit.headers.get('x-gw-cache')).toBe('HIT');
    expect(hit.json.cache).toMatchObject({ status: 'hit', source_request_id: first!.json.id });
    // A key's tier changed on one process is the tier on the other at once.
    const keys = await f.client.get<{ data: Array<{ id: string; key_prefix: string }> }>('/gateway_keys');
    const id = keys.body.data.find((k) => secret.startsWith(k.key_prefix))!.id;
    const key = await f.client.get<Loose>(`/gateway_keys/${id}`);
    expect((await f.client.patch(`/gateway_keys/${id}`, { rate_limit_rpm: 300 }, key.etag!)).status).toBe(200);
    let limit: string | null = null;
    for (let i = 0; i < 20 && limit !== '300'; i++) {
      limit = (await ask(secret, 1, second.url)).headers.get('x-ratelimit-limit');
      if (limit !== '300') await sleep(100);
    }
    expect(limit).toBe('300');
  });
});
