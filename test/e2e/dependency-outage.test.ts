import { and, eq, gte } from 'drizzle-orm';
import { TEMPORAL_REQUEST_DEADLINE_MS } from '../../api/temporal-client';
import { spendLedger } from '../../core/db/schema';
import { DEPENDENCY_RETRY_AFTER_SECONDS } from '../../core/transient';
import { startRedisServer, type LocalService } from '../../scripts/lib/local-services';
import { freePort } from '../../scripts/lib/ports';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';
import { startTemporalDevServer, type DevServer } from '../../scripts/lib/temporal-dev-server';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress, startTestApi, uniquePrefix } from '../helpers/harness';
import { bearer, createTenant } from '../helpers/tenants';

/**
 * Our own dependencies going away under a running API, and coming back (spec 7: 503 without a
 * code is transient). This file runs its own Temporal dev server and redis-server, so stopping
 * them touches no other test. The machine's Postgres is shared by every test file and is never
 * stopped: the Postgres case runs a second API against a port where nothing listens.
 */
describe('dependency outages', () => {
  const prefix = uniquePrefix('outage');
  let temporalPort: number;
  let redisPort: number;
  let temporal: DevServer | null = null;
  let redis: LocalService | null = null;
  let f: ChatFixture;
  let secret: string;
  let seq = 0;

  beforeAll(async () => {
    temporalPort = await freePort();
    redisPort = await freePort();
    temporal = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: temporalPort });
    redis = await startRedisServer(redisPort);
    f = await startChatFixture({ TEMPORAL_ADDRESS: temporal.address, REDIS_URL: redis.url, GW_TASK_QUEUE_PREFIX: prefix });
    await f.connect('openai', { name: 'outage videos' });
    secret = await f.key({ rate_limit_rpm: 50000 });
  }, 120_000);
  afterAll(async () => {
    await f?.close();
    await temporal?.stop();
    await redis?.stop();
  });

  async function call(method: string, path: string, body?: unknown) {
    const res = await fetch(`${f.api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: Loose = {};
    try {
      json = JSON.parse(text) as Loose;
    } catch {
      // not JSON: the assertions below say so
    }
    return { status: res.status, headers: res.headers, json, text };
  }
  const submitVideo = () => call('POST', '/v1/videos', { model: 'openai/sora-2', prompt: `a quiet harbour ${seq++}`, duration_seconds: 4 });
  const chat = () => call('POST', '/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] });

  function expectTransient(answer: { status: number; headers: Headers; json: Loose; text: string }) {
    expect({ status: answer.status, body: answer.json }).toEqual({
      status: 503,
      body: { error: { message: expect.any(String), type: 'no_available_provider', code: null } },
    });
    expect(answer.headers.get('retry-after')).toBe(String(DEPENDENCY_RETRY_AFTER_SECONDS));
    expect(answer.headers.get('x-gw-request-id')).toMatch(/^req_/);
  }

  /** Polls until `probe` answers `status`; the bound is a wait, not an assertion on timing. */
  async function until<A extends { status: number }>(probe: () => Promise<A>, status: number, waitMs = 45_000): Promise<A> {
    const deadline = Date.now() + waitMs;
    let last = await probe();
    while (last.status !== status && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      last = await probe();
    }
    return last;
  }

  it('answers POST /v1/videos 503 without a code while Temporal is down, and 202 once it is back', async () => {
    expect((await submitVideo()).status).toBe(202);

    await temporal!.stop();
    temporal = null;
    expectTransient(await submitVideo());
    // Reading jobs needs only Postgres, and still works.
    expect((await call('GET', '/v1/jobs')).status).toBe(200);

    // Readiness is what serves requests: Postgres and Redis. The deep read names Temporal.
    expect((await fetch(`${f.api.url}/readyz`)).status).toBe(200);
    const ready = await fetch(`${f.api.url}/healthz/deep`);
    expect(ready.status).toBe(503);
    const report = (await ready.json()) as { status: string; down: string[]; checks: Record<string, string> };
    expect(report.status).toBe('unavailable');
    expect(report.down).toContain('temporal');
    expect(report.down).not.toContain('postgres');
    // Names only: no error text, address or port of what is down.
    expect(Object.values(report.checks).every((s) => s === 'ok' || s === 'down')).toBe(true);
    expect(JSON.stringify(report)).not.toContain(String(temporalPort));

    temporal = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: temporalPort });
    const back = await until(submitVideo, 202);
    expect(back.status).toBe(202);
    expect(back.json).toMatchObject({ object: 'job', status: 'queued' });
  }, 120_000);

  it('keeps serving while Temporal is silent (paused, as in a partition): ready, chat and /v1/key answer; video submit and cancel answer within their deadlines', async () => {
    const queued = await submitVideo();
    expect(queued.status).toBe(202);
    const server = temporal!;
    server.process.kill('SIGSTOP');
    try {
      // A wait bound, not a timing assertion: without deadlines these calls never answered.
      const within = (ms: number) => AbortSignal.timeout(ms);
      expect((await fetch(`${f.api.url}/readyz`, { signal: within(10_000) })).status).toBe(200);
      expect((await chat()).status).toBe(200);
      expect((await call('GET', '/v1/key')).status).toBe(200);
      expect((await call('GET', `/v1/jobs/${queued.json.id}`)).status).toBe(200);
      // One deadline for the whole submit (issue 55: a start then a describe took 8 s).
      const bound = TEMPORAL_REQUEST_DEADLINE_MS + 2_000;
      const submitted = await Promise.race([submitVideo(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`POST /v1/videos gave no answer in ${bound} ms`)), bound))]);
      expectTransient(submitted);
      // The cancel is recorded in Postgres when no worker (here: no Temporal) takes it.
      const canceled = await Promise.race([call('POST', `/v1/jobs/${queued.json.id}/cancel`), new Promise<never>((_, reject) => setTimeout(() => reject(new Error('cancel gave no answer in 20 s')), 20_000))]);
      expect(canceled.status).toBe(200);
      expect(canceled.json).toMatchObject({ status: 'canceled', usage: null, completed_at: expect.any(Number) });
      const deep = await fetch(`${f.api.url}/healthz/deep`, { signal: within(20_000) });
      expect(deep.status).toBe(503);
    } finally {
      server.process.kill('SIGCONT');
    }
    expect((await until(submitVideo, 202)).status).toBe(202);
  }, 120_000);

  it('starts while Temporal is unreachable: chat serves, a video submit answers 503 and holds nothing against the key (issue 55)', async () => {
    // Nothing listens there: the API connects lazily, so it starts, as a restart or a scale-up
    // during an outage must.
    const unreachable = `127.0.0.1:${await freePort()}`;
    const api = await startTestApi({ env: { TEMPORAL_ADDRESS: unreachable, GW_TASK_QUEUE_PREFIX: prefix, GW_ALLOW_PRIVATE_NETWORK: 'true' } });
    try {
      const post = async (path: string, body: unknown, key: string) => {
        const res = await fetch(`${api.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() }, body: JSON.stringify(body) });
        const text = await res.text();
        return { status: res.status, headers: res.headers, json: JSON.parse(text) as Loose, text };
      };
      expect((await post('/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }, secret)).status).toBe(200);
      // A key whose limit holds one render (a sora-2 render of 4 s holds $0.40): a refused
      // submit that kept its hold would make the next one 402, and chat on the key too.
      const limited = await f.key({ credit_limit: { amount: 0.5, period: 'monthly' }, rate_limit_rpm: 50000 });
      const since = new Date();
      for (let i = 0; i < 3; i++) expectTransient(await post('/v1/videos', { model: 'openai/sora-2', prompt: `refused ${seq++}`, duration_seconds: 4 }, limited));
      expect((await post('/v1/chat/completions', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }] }, limited)).status).toBe(200);
      // Each refused submit reserved and gave back at once: released, none left reserved.
      const rows = await f.database.db.select({ state: spendLedger.state }).from(spendLedger).where(and(eq(spendLedger.orgId, f.tenant.orgId), gte(spendLedger.createdAt, since)));
      expect(rows.map((r) => r.state)).toEqual(['released', 'released', 'released']);
    } finally {
      await api.close();
    }
  });

  it('answers chat and /v1/models 503 without a code while Redis is down, and 200 once it is back', async () => {
    expect((await chat()).status).toBe(200);

    await redis!.stop();
    redis = null;
    expectTransient(await call('GET', '/v1/models'));
    expectTransient(await chat());

    const ready = await fetch(`${f.api.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { down: string[] }).down).toContain('redis');

    redis = await startRedisServer(redisPort);
    expect((await until(() => call('GET', '/v1/models'), 200)).status).toBe(200);
    expect((await until(chat, 200)).status).toBe(200);
  }, 120_000);

  it('answers 503 without a code when Postgres cannot be reached', async () => {
    // Nothing listens on a port just found free: every connection is refused, as while
    // Postgres restarts. The machine's own Postgres is shared and stays up.
    const port = await freePort();
    const tenant = await createTenant(f.database.db);
    const broken = await startTestApi({ env: { DATABASE_URL: `postgres://postgres:postgres@127.0.0.1:${port}/none`, GW_TASK_QUEUE_PREFIX: prefix } });
    try {
      const res = await fetch(`${broken.url}/v1/models`, { headers: { ...bearer(tenant.key.secret), 'x-forwarded-for': randomClientAddress() } });
      const text = await res.text();
      expectTransient({ status: res.status, headers: res.headers, json: JSON.parse(text) as Loose, text });
      const manage = await fetch(`${broken.url}/manage/v1/projects`, { headers: { ...bearer(tenant.token), 'x-forwarded-for': randomClientAddress() } });
      const manageText = await manage.text();
      expectTransient({ status: manage.status, headers: manage.headers, json: JSON.parse(manageText) as Loose, text: manageText });
    } finally {
      await broken.close();
    }
  });
});
