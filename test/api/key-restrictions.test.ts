import http from 'node:http';
import { eq } from 'drizzle-orm';
import { organizations } from '../../core/db/schema';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress, startTestWorkers, uniquePrefix } from '../helpers/harness';
import { createTenant } from '../helpers/tenants';

const hello = [{ role: 'user', content: 'Say hello' }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Issue 10, section 3 (gateway side): a route slug meets every model allowlist like a model
 * does, for chat and video; `X-RateLimit-*` on every answer to a known key, refusals included;
 * the rate window belongs to the key's lineage.
 */
describe('key restrictions and rate headers', () => {
  const prefix = uniquePrefix('keyrestr');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.00003' };
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  let first: string;
  let second: string;
  let seq = 0;

  beforeAll(async () => {
    f = await startChatFixture(env);
    workers = await startTestWorkers(['jobs'], prefix, { ...env, GW_ALLOW_PRIVATE_NETWORK: 'true' });
    first = await f.connect('openai', { name: 'first' });
    second = await f.connect('openai', { name: 'second' });
  });
  afterAll(async () => {
    await workers?.shutdown();
    await f.close();
  });

  async function route(targets: Array<{ connection_id: string; model: string }>): Promise<string> {
    const slug = `r-${Date.now()}-${seq++}`;
    const res = await f.client.post('/routes', { slug, targets, failover: { server_error: 'failover' } });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    await f.settle();
    return slug;
  }
  /** Two targets: `openai/gpt-4o-mini` on the first connection, then `openai/gpt-4o` on the second. */
  const twoTargets = () => route([{ connection_id: first, model: 'gpt-4o-mini' }, { connection_id: second, model: 'gpt-4o' }]);

  async function key(settings: Record<string, unknown> = {}): Promise<{ id: string; secret: string; version: string }> {
    const res = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: `k${seq++}`, project_id: f.tenant.projectId, ...settings });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    return { id: res.body.id, secret: res.body.secret, version: res.etag! };
  }

  async function call(method: string, path: string, secret: string, body?: unknown) {
    const res = await fetch(`${f.api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, json: (text ? JSON.parse(text) : {}) as Loose };
  }

  function expectRefusal(res: { status: number; json: Loose }, status: number, type: string, code: string | null) {
    expect({ status: res.status, error: res.json.error }).toEqual({ status, error: { message: expect.any(String), type, code } });
  }

  function expectRateHeaders(headers: Headers | http.IncomingHttpHeaders, limit: number) {
    const get = (name: string) => (headers instanceof Headers ? headers.get(name) : (headers[name] as string | undefined) ?? null);
    expect(get('x-ratelimit-limit')).toBe(String(limit));
    expect(Number(get('x-ratelimit-remaining'))).toBeGreaterThanOrEqual(0);
    expect(Number(get('x-ratelimit-remaining'))).toBeLessThan(limit);
    // The window's end, in Unix seconds, within the next minute.
    const reset = Number(get('x-ratelimit-reset'));
    expect(reset).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 61);
  }

  async function patchProject(body: Record<string, unknown>) {
    const current = await f.client.get(`/projects/${f.tenant.projectId}`);
    const res = await f.client.patch(`/projects/${f.tenant.projectId}`, body, current.etag!);
    expect(res.status).toBe(200);
    await f.settle();
  }
  async function patchOrgSettings(body: Record<string, unknown>) {
    const current = await f.client.get('/org_settings');
    const res = await f.client.patch('/org_settings', body, current.etag!);
    expect(res.status).toBe(200);
    await f.settle();
  }

  describe('a route slug meets the model allowlists', () => {
    it('skips a target the key allowlist excludes and serves the next', async () => {
      const slug = await twoTargets();
      const { secret } = await key({ model_allowlist: ['openai/gpt-4o'] });
      const res = await f.chat(secret, { model: slug, messages: hello });
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ connection: second, route_name: slug });
    });

    it('answers 403 model_not_allowed when the key allowlist excludes every target', async () => {
      const slug = await twoTargets();
      const { secret } = await key({ model_allowlist: ['openai/gpt-4.1'] });
      const res = await f.chat(secret, { model: slug, messages: hello });
      expectRefusal({ status: res.status, json: res.json }, 403, 'permission_denied', 'model_not_allowed');
      expectRateHeaders(res.headers, 200);
      // Nor is the route listed among the models the key can call.
      const models = await call('GET', '/v1/models', secret);
      expect(models.json.data.map((m: Loose) => m.id)).not.toContain(slug);
    });

    it('a bare model name in the allowlist matches a target too', async () => {
      const slug = await twoTargets();
      const { secret } = await key({ model_allowlist: ['gpt-4o'] });
      const res = await f.chat(secret, { model: slug, messages: hello });
      expect(res.status).toBe(200);
      expect(res.json.connection).toBe(second);
    });

    it('applies the project allowlist to route targets', async () => {
      const slug = await twoTargets();
      const { secret } = await key();
      try {
        await patchProject({ model_allowlist: ['openai/gpt-4o'] });
        const served = await f.chat(secret, { model: slug, messages: hello });
        expect(served.status).toBe(200);
        expect(served.json.connection).toBe(second);
        await patchProject({ model_allowlist: ['openai/o3'] });
        const refused = await f.chat(secret, { model: slug, messages: hello });
        expectRefusal({ status: refused.status, json: refused.json }, 403, 'permission_denied', 'model_not_allowed');
      } finally {
        await patchProject({ model_allowlist: [] });
      }
    });

    it('applies the organization allowlist to route targets', async () => {
      const slug = await twoTargets();
      const { secret } = await key();
      try {
        await patchOrgSettings({ model_allowlist: ['openai/gpt-4o'] });
        const served = await f.chat(secret, { model: slug, messages: hello });
        expect(served.status).toBe(200);
        expect(served.json.connection).toBe(second);
        await patchOrgSettings({ model_allowlist: ['openai/o3'] });
        const refused = await f.chat(secret, { model: slug, messages: hello });
        expectRefusal({ status: refused.status, json: refused.json }, 403, 'permission_denied', 'model_not_allowed');
      } finally {
        await patchOrgSettings({ model_allowlist: [] });
      }
    });

    it('lets a list that names the route itself allow its targets', async () => {
      const slug = await twoTargets();
      const { secret } = await key({ model_allowlist: [slug] });
      const res = await f.chat(secret, { model: slug, messages: hello });
      expect(res.status).toBe(200);
      expect(res.json.connection).toBe(first);
    });

    it('checks a video route the same way: skipped target, then 403 when none is left', async () => {
      const slug = await route([{ connection_id: first, model: 'sora-2-pro' }, { connection_id: second, model: 'sora-2' }]);
      const allowed = await key({ model_allowlist: ['openai/sora-2'] });
      const created = await call('POST', '/v1/videos', allowed.secret, { model: slug, prompt: `allowlist [sandbox render_ms=50] ${seq++}`, duration_seconds: 4 });
      expect(created.status).toBe(202);
      const deadline = Date.now() + 20_000;
      let job: Loose = created.json;
      while (!['succeeded', 'failed', 'canceled'].includes(job.status)) {
        if (Date.now() > deadline) throw new Error(`job stuck: ${JSON.stringify(job)}`);
        await sleep(50);
        job = (await call('GET', `/v1/jobs/${created.json.id}`, allowed.secret)).json;
      }
      expect(job).toMatchObject({ status: 'succeeded', connection: second, model: 'sora-2' });

      const refusedKey = await key({ model_allowlist: ['openai/sora-1'] });
      const refused = await call('POST', '/v1/videos', refusedKey.secret, { model: slug, prompt: 'nope', duration_seconds: 4 });
      expectRefusal(refused, 403, 'permission_denied', 'model_not_allowed');
      expectRateHeaders(refused.headers, 200);
    });
  });

  describe('X-RateLimit-* on every answer to a known key', () => {
    it('402 from the organization standing (subscription_required)', async () => {
      const other = await createTenant(f.database.db);
      await f.database.db.update(organizations).set({ entitlementState: 'lapsed' }).where(eq(organizations.id, other.orgId));
      const res = await call('GET', '/v1/models', other.key.secret);
      expectRefusal(res, 402, 'budget_exceeded', 'subscription_required');
      expectRateHeaders(res.headers, 200);
    });

    it('403 key_disabled', async () => {
      const k = await key({ rate_limit_rpm: 300 });
      expect((await f.client.patch(`/gateway_keys/${k.id}`, { disabled: true }, k.version)).status).toBe(200);
      await f.settle();
      const res = await call('GET', '/v1/models', k.secret);
      expectRefusal(res, 403, 'permission_denied', 'key_disabled');
      expectRateHeaders(res.headers, 300);
    });

    it('403 ip_not_allowed', async () => {
      const k = await key({ allowed_ips: ['203.0.113.7'] });
      const res = await call('GET', '/v1/models', k.secret);
      expectRefusal(res, 403, 'permission_denied', 'ip_not_allowed');
      expectRateHeaders(res.headers, 200);
    });

    it('404 for an unknown /v1 path and for an unknown model', async () => {
      const k = await key();
      const unknownPath = await call('GET', '/v1/nothing-here', k.secret);
      expectRefusal(unknownPath, 404, 'not_found', null);
      expectRateHeaders(unknownPath.headers, 200);
      const wrongMethod = await call('GET', '/v1/chat/completions', k.secret);
      expect(wrongMethod.status).toBe(404);
      expectRateHeaders(wrongMethod.headers, 200);
      const unknownModel = await f.chat(k.secret, { model: 'openai/no-such-model-at-all', messages: hello });
      expectRefusal({ status: unknownModel.status, json: unknownModel.json }, 404, 'model_not_found', 'model_not_found');
      expectRateHeaders(unknownModel.headers, 200);
      // Without a key the unknown path is still a plain 404, without rate headers.
      const anonymous = await fetch(`${f.api.url}/v1/nothing-here`);
      expect(anonymous.status).toBe(404);
      expect(anonymous.headers.get('x-ratelimit-limit')).toBeNull();
    });

    it('413 decided from Content-Length before the body is read', async () => {
      const k = await key({ rate_limit_rpm: 500 });
      const answer = await new Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
        const req = http.request(`${f.api.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${k.secret}`, 'content-type': 'application/json', 'content-length': String(30_000_000), 'x-forwarded-for': randomClientAddress() },
        });
        req.on('response', (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => {
            resolve({ status: res.statusCode!, body: text, headers: res.headers });
            req.destroy();
          });
        });
        req.on('error', reject);
        req.flushHeaders();
      });
      expectRefusal({ status: answer.status, json: JSON.parse(answer.body) }, 413, 'request_too_large', null);
      expectRateHeaders(answer.headers, 500);
    });

    it('429 past the tier, with Retry-After; the window is shared across a rotation', async () => {
      const k = await key({ rate_limit_rpm: 60 });
      const remaining: number[] = [];
      for (let i = 0; i < 30; i++) {
        const res = await call('GET', '/v1/key', k.secret);
        expect(res.status).toBe(200);
        remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
      }
      const rotated = await f.client.post<{ id: string; secret: string }>(`/gateway_keys/${k.id}/rotate`, {});
      expect(rotated.status).toBe(200);
      await f.settle();
      // The old key still works during the overlap; both count in the lineage's one window.
      for (let i = 0; i < 15; i++) {
        const res = await call('GET', '/v1/key', rotated.body.secret);
        expect(res.status).toBe(200);
        remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
        const old = await call('GET', '/v1/key', k.secret);
        expect(old.status).toBe(200);
        remaining.push(Number(old.headers.get('x-ratelimit-remaining')));
      }
      expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => 59 - i));
      const refused = await call('GET', '/v1/key', rotated.body.secret);
      expectRefusal(refused, 429, 'rate_limit_exceeded', null);
      expect(refused.headers.get('x-ratelimit-limit')).toBe('60');
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      const oldRefused = await call('GET', '/v1/key', k.secret);
      expect(oldRefused.status).toBe(429);
    });
  });
});
