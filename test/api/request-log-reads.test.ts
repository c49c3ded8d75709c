import { eq, sql } from 'drizzle-orm';
import { organizations, orgSettings, requestLogs } from '../../core/db/schema';
import { newId } from '../../core/ids';
import type { RequestLogEntry } from '../../core/request-log/writer';
import { issueGatewayKey, createProject } from '../../core/tenancy/gateway-keys';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress } from '../helpers/harness';
import { manageClient } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

const DAY = 86_400_000;
const PROMPT = 'the secret prompt text';
const ANSWER = 'the secret answer text';

/** Issue 13: `GET /v1/requests[/{id}]`, `GET /manage/v1/requests[/{id}]`, `GET /manage/v1/traces/{id}`. */
describe('request log reads', () => {
  let f: ChatFixture;

  beforeAll(async () => {
    f = await startChatFixture();
  });
  afterAll(() => f.close());

  const db = () => f.database.db;

  type Org = Tenant & { newKey(settings?: Partial<Parameters<typeof issueGatewayKey>[1]>): Promise<{ id: string; secret: string }>; manage: ReturnType<typeof manageClient> };

  async function org(plan: 'trial' | 'team' | 'business' = 'business'): Promise<Org> {
    const t = await createTenant(db(), { observabilityAccess: 'organization' });
    if (plan !== 'business') await db().update(organizations).set({ plan }).where(eq(organizations.id, t.orgId));
    return {
      ...t,
      newKey: (settings = {}) => issueGatewayKey(db(), { orgId: t.orgId, projectId: t.projectId, label: 'reader', ...settings }),
      manage: manageClient(f.api.url, t.token),
    };
  }

  let seq = 0;
  /** Inserts request-log rows directly (what the batch writer would write), `ageMs` before now. */
  async function insert(o: Org, rows: Array<Partial<RequestLogEntry> & { ageMs?: number }>): Promise<string[]> {
    const now = Date.now();
    const values = rows.map(({ ageMs = 0, ...r }) => {
      const createdAt = r.createdAt ?? new Date(now - ageMs);
      return {
        id: newId('req', createdAt.getTime()), orgId: o.orgId, keyId: o.key.id, projectId: o.projectId, endpoint: 'chat.completions',
        requestedModel: 'gpt-4o-mini', servedModel: 'gpt-4o-mini', provider: 'openai', status: 200, latencyMs: 10 + (seq++ % 50),
        createdAt, ...r,
      } satisfies RequestLogEntry;
    });
    await db().insert(requestLogs).values(values);
    return values.map((v) => v.id);
  }

  async function v1(secret: string, path: string): Promise<{ status: number; body: Loose }> {
    const res = await fetch(`${f.api.url}/v1${path}`, { headers: { authorization: `Bearer ${secret}`, 'x-forwarded-for': randomClientAddress() } });
    return { status: res.status, body: (await res.json()) as Loose };
  }

  const ids = (body: Loose) => (body.data as Loose[]).map((r) => r.id as string);

  describe('GET /v1/requests by observability_access and payload_access', () => {
    let o: Org;
    let mine: string[];
    let rotated: string[];
    let other: string[];
    let foreign: string[];
    let scoped: { id: string; secret: string };
    let orgWide: { id: string; secret: string };
    let payload: { id: string; secret: string };

    beforeAll(async () => {
      o = await org();
      scoped = await o.newKey({ observabilityAccess: 'scoped' });
      const successor = await o.newKey({ observabilityAccess: 'none', lineageId: scoped.id, rotatedFromKeyId: scoped.id });
      const otherKey = await o.newKey({ observabilityAccess: 'none' });
      orgWide = await o.newKey({ observabilityAccess: 'organization' });
      payload = await o.newKey({ observabilityAccess: 'organization', payloadAccess: true });
      mine = await insert(o, [{ keyId: scoped.id, ageMs: 5000, requestBody: { messages: [{ role: 'user', content: PROMPT }] }, responseBody: { content: ANSWER } }]);
      rotated = await insert(o, [{ keyId: successor.id, ageMs: 4000 }]);
      other = await insert(o, [{ keyId: otherKey.id, ageMs: 3000 }]);
      const elsewhere = await org();
      foreign = await insert(elsewhere, [{ ageMs: 2000 }]);
    });

    it('refuses a key whose observability_access is none (403 permission_denied), list and single read', async () => {
      const none = await o.newKey({ observabilityAccess: 'none' });
      for (const path of ['/requests', `/requests/${mine[0]}`, '/requests?status=bogus']) {
        const res = await v1(none.secret, path);
        expect([res.status, res.body.error?.type]).toEqual([403, 'permission_denied']);
      }
    });

    it('scoped sees its own lineage (rotations included), not the rest of the organization', async () => {
      const res = await v1(scoped.secret, '/requests');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ object: 'list', has_more: false, next_cursor: '' });
      expect(ids(res.body)).toEqual([...rotated, ...mine]);
      expect((await v1(scoped.secret, `/requests/${rotated[0]}`)).status).toBe(200);
      const outside = await v1(scoped.secret, `/requests/${other[0]}`);
      expect([outside.status, outside.body.error?.type]).toEqual([404, 'not_found']);
    });

    it('organization sees the organization, newest first, and never another organization', async () => {
      const res = await v1(orgWide.secret, '/requests');
      expect(ids(res.body)).toEqual([...other, ...rotated, ...mine]);
      const cross = await v1(orgWide.secret, `/requests/${foreign[0]}`);
      expect([cross.status, cross.body.error?.type]).toEqual([404, 'not_found']);
      expect((await v1(orgWide.secret, '/requests/req_doesnotexist')).status).toBe(404);
    });

    it('gives the prompt and the answer only with payload_access, only on the single read', async () => {
      const without = await v1(orgWide.secret, `/requests/${mine[0]}`);
      expect(without.status).toBe(200);
      expect(without.body).not.toHaveProperty('request');
      expect(without.body).not.toHaveProperty('response');
      expect(JSON.stringify(without.body)).not.toContain('secret prompt');

      const withAccess = await v1(payload.secret, `/requests/${mine[0]}`);
      expect(withAccess.body.request).toEqual({ messages: [{ role: 'user', content: PROMPT }] });
      expect(withAccess.body.response).toEqual({ content: ANSWER });
      // A request nothing was captured for answers null bodies.
      expect((await v1(payload.secret, `/requests/${other[0]}`)).body).toMatchObject({ request: null, response: null });

      const list = await v1(payload.secret, '/requests');
      expect(JSON.stringify(list.body)).not.toContain('secret prompt');
    });

    it('withholds bodies once the organization\'s prompt retention has passed, before the schedule deletes them', async () => {
      await db().insert(orgSettings).values({ id: o.orgId, orgId: o.orgId, promptLoggingRetentionDays: 3 })
        .onConflictDoUpdate({ target: orgSettings.id, set: { promptLoggingRetentionDays: 3 } });
      const [old] = await insert(o, [{ ageMs: 4 * DAY, requestBody: { messages: [{ role: 'user', content: PROMPT }] }, responseBody: { content: ANSWER } }]);
      const res = await v1(payload.secret, `/requests/${old}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: old, request: null, response: null });
      // Still retained: shown.
      expect((await v1(payload.secret, `/requests/${mine[0]}`)).body.request).not.toBeNull();
    });
  });

  describe('filters', () => {
    let o: Org;
    let reader: string;
    const rows: Record<string, string> = {};

    beforeAll(async () => {
      o = await org();
      reader = (await o.newKey({ observabilityAccess: 'organization' })).secret;
      const second = await o.newKey({ observabilityAccess: 'none' });
      const made = await insert(o, [
        { ageMs: 10 * DAY, requestedModel: 'route-a', routeSlug: 'route-a', status: 200, userId: 'alice', sessionId: 'run-1', tags: { team: 'search', env: 'prod' } },
        { ageMs: 8 * DAY, requestedModel: 'gpt-4o-mini', status: 429, userId: 'bob', sessionId: 'run-1', tags: { team: 'search', env: 'dev' } },
        { ageMs: 6 * DAY, requestedModel: 'claude-3-5-haiku', provider: 'anthropic', status: 502, userId: 'alice', tags: { team: 'ads' } },
        { ageMs: 4 * DAY, requestedModel: 'gpt-4o-mini', status: 400, keyId: second.id, tags: {} },
        { ageMs: 2 * DAY, requestedModel: 'gpt-4o-mini', status: 200, sessionId: 'run-2', tags: { env: 'prod' } },
      ]);
      ['d10', 'd8', 'd6', 'd4', 'd2'].forEach((name, i) => (rows[name] = made[i]!));
      rows.second = second.id;
    });

    const seen = async (query: string) => {
      const res = await v1(reader, `/requests?${query}`);
      expect([res.status, res.body.error]).toEqual([200, undefined]);
      return ids(res.body);
    };
    const names = (...n: string[]) => n.map((x) => rows[x]);

    it.each([
      ['model=gpt-4o-mini', ['d2', 'd4', 'd8']],
      ['model=route-a', ['d10']],
      ['status=429', ['d8']],
      ['status=4xx', ['d4', 'd8']],
      ['status=5XX', ['d6']],
      ['status=2xx', ['d2', 'd10']],
      ['user_id=alice', ['d6', 'd10']],
      ['session_id=run-1', ['d8', 'd10']],
      ['tags.team=search', ['d8', 'd10']],
      ['tags.team=search&tags.env=prod', ['d10']],
      ['tags.env=prod', ['d2', 'd10']],
      ['route=route-a', ['d10']],
      ['provider=anthropic', ['d6']],
      ['model=gpt-4o-mini&status=2xx', ['d2']],
      ['user_id=nobody', []],
    ])('%s', async (query, expected) => {
      expect(await seen(query)).toEqual(names(...expected));
    });

    it('key_id', async () => {
      expect(await seen(`key_id=${rows.second}`)).toEqual(names('d4'));
      expect(await seen(`key_id=${o.key.id}`)).toEqual(names('d2', 'd6', 'd8', 'd10'));
    });

    it('from and to, as ISO 8601 and as Unix seconds (from inclusive, to exclusive)', async () => {
      const iso = (ms: number) => new Date(Date.now() - ms).toISOString();
      const unix = (ms: number) => String(Math.floor((Date.now() - ms) / 1000));
      expect(await seen(`from=${iso(7 * DAY)}`)).toEqual(names('d2', 'd4', 'd6'));
      expect(await seen(`to=${iso(7 * DAY)}`)).toEqual(names('d8', 'd10'));
      expect(await seen(`from=${unix(9 * DAY)}&to=${unix(3 * DAY)}`)).toEqual(names('d4', 'd6', 'd8'));
      expect(await seen(`from=${encodeURIComponent(new Date(Date.now() - 5 * DAY).toISOString().replace('Z', '+00:00'))}`)).toEqual(names('d2', 'd4'));
    });

    it.each([
      'status=abc', 'status=600', 'status=4x', 'from=yesterday', 'to=2024-13-45', 'limit=0', 'limit=101', 'limit=1.5',
      'provider=nope', 'key_id=notakey', 'after=garbage', 'model=a&model=b', 'colour=red', 'tags.=x', `from=${Math.floor(Date.now() / 1000)}&to=${Math.floor(Date.now() / 1000) - 60}`,
    ])('refuses %s with 400 invalid_request_error', async (query) => {
      const res = await v1(reader, `/requests?${query}`);
      expect([res.status, res.body.error?.type]).toEqual([400, 'invalid_request_error']);
    });

    it('the same filters on the management API', async () => {
      const res = await o.manage.get<Loose>('/requests?tags.team=search&status=4xx');
      expect([res.status, ids(res.body)]).toEqual([200, names('d8')]);
      const bad = await o.manage.get('/requests?status=abc');
      expect([bad.status, bad.body.error?.type]).toEqual([400, 'invalid_request_error']);
      expect((await o.manage.get('/requests?limit=101')).status).toBe(400);
      expect((await o.manage.get('/requests?limit=100')).status).toBe(200);
    });
  });

  describe('paging', () => {
    it('limit defaults to 20; pages follow next_cursor newest first, has_more exact', async () => {
      const o = await org();
      const reader = (await o.newKey({ observabilityAccess: 'organization' })).secret;
      const made = await insert(o, Array.from({ length: 25 }, (_, i) => ({ ageMs: (i + 1) * 1000 })));
      const first = await v1(reader, '/requests');
      expect(first.body.data).toHaveLength(20);
      expect(first.body.has_more).toBe(true);
      const second = await v1(reader, `/requests?after=${first.body.next_cursor}`);
      expect([second.body.data.length, second.body.has_more, second.body.next_cursor]).toEqual([5, false, '']);
      expect([...ids(first.body), ...ids(second.body)]).toEqual(made);
      // Exactly a page's worth: no more, and no cursor.
      const exact = await v1(reader, '/requests?limit=25');
      expect([exact.body.data.length, exact.body.has_more, exact.body.next_cursor]).toEqual([25, false, '']);
    });

    it('every row present before paging began is listed exactly once while rows are inserted concurrently', async () => {
      const o = await org();
      const reader = (await o.newKey({ observabilityAccess: 'organization' })).secret;
      const base = Date.now() - 60_000;
      // Ties on the millisecond and rows that differ only below it.
      const before = await insert(o, Array.from({ length: 40 }, (_, i) => ({ createdAt: new Date(base + Math.floor(i / 4) * 1000) })));
      await db().execute(sql`update request_logs set created_at = created_at + (interval '1 microsecond' * (length(id) + ascii(right(id, 1)) % 7)) where org_id = ${o.orgId} and id in (select id from request_logs where org_id = ${o.orgId} order by id limit 10)`);

      const listed: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        // New rows land everywhere in the timeline: newer than all, between pages, and older.
        await insert(o, [{ createdAt: new Date() }, { createdAt: new Date(base + Math.random() * 10_000) }, { createdAt: new Date(base - 5000) }]);
        const page: { status: number; body: Loose } = await v1(reader, `/requests?limit=7${cursor ? `&after=${cursor}` : ''}`);
        expect(page.status).toBe(200);
        listed.push(...ids(page.body));
        cursor = page.body.next_cursor as string;
        expect(page.body.has_more).toBe(cursor !== '');
      } while (cursor && ++pages < 50);

      for (const id of before) expect(listed.filter((x) => x === id)).toHaveLength(1);
      expect(new Set(listed).size).toBe(listed.length);
    });
  });

  describe('management data operations', () => {
    let o: Org;
    let session: string[];
    let foreignSession: string;

    beforeAll(async () => {
      o = await org();
      const bodies = { requestBody: { messages: [{ role: 'user', content: PROMPT }] }, responseBody: { content: ANSWER } };
      session = await insert(o, [
        { ageMs: 3000, sessionId: 'agent-run', cost: 0.0015, priceSource: 'list', usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 }, ...bodies },
        { ageMs: 2000, sessionId: 'agent-run', status: 429, errorType: 'rate_limit_exceeded', errorCode: 'provider_rate_limited',
          attempts: [{ connection_id: 'conn_a', provider: 'openai', model: 'gpt-4o-mini', position: 'primary', outcome: 'rate_limit', status: 429, latency_ms: 5 }] },
        { ageMs: 1000, sessionId: 'agent-run', cost: 0.0025, priceSource: 'custom', usage: { prompt_tokens: 200, completion_tokens: 30, total_tokens: 230 },
          cacheStatus: 'miss', guardrails: { action: 'redacted', findings: [{ detector: 'email', stage: 'input', action: 'redact', count: 1 }] }, ...bodies },
        { ageMs: 500, sessionId: 'agent-run', usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } },
      ]);
      await insert(o, [{ ageMs: 100, sessionId: 'other-run' }]);
      const elsewhere = await org();
      foreignSession = 'their-run';
      await insert(elsewhere, [{ sessionId: foreignSession }]);
    });

    it('refuses a token without analytics:read with 403 insufficient_scope, before any lookup', async () => {
      const { token } = await issueManagementToken(db(), { orgId: o.orgId, name: 'no analytics', scopes: ['projects:read'], createdByMemberId: o.memberId });
      const client = manageClient(f.api.url, token);
      for (const path of ['/requests', `/requests/${session[0]}`, '/requests/req_nothing', '/traces/agent-run', '/requests?status=bogus']) {
        const res = await client.get(path);
        expect([path, res.status, res.body.error?.code]).toEqual([path, 403, 'insufficient_scope']);
      }
      const { token: reader } = await issueManagementToken(db(), { orgId: o.orgId, name: 'reader', scopes: ['*:read'], createdByMemberId: o.memberId });
      expect((await manageClient(f.api.url, reader).get('/requests')).status).toBe(200);
      const { token: analytics } = await issueManagementToken(db(), { orgId: o.orgId, name: 'analytics', scopes: ['analytics:read'], createdByMemberId: o.memberId });
      expect((await manageClient(f.api.url, analytics).get(`/requests/${session[0]}`)).status).toBe(200);
    });

    it('reads one request\'s metadata: attempts with failure kinds, cache, guardrails, cost; no version', async () => {
      const failed = await o.manage.get<Loose>(`/requests/${session[1]}`);
      expect(failed.status).toBe(200);
      expect(failed.etag).toBeNull();
      expect(failed.body).not.toHaveProperty('version');
      expect(failed.body).toMatchObject({
        id: session[1], object: 'request_log', status: 429, error: { type: 'rate_limit_exceeded', code: 'provider_rate_limited' },
        attempts: [{ connection_id: 'conn_a', outcome: 'rate_limit', failure_kind: 'rate_limit', status: 429, position: 'primary' }],
        metadata: { session_id: 'agent-run', user_id: null, tags: {} },
      });
      const served = await o.manage.get<Loose>(`/requests/${session[2]}`);
      expect(served.body).toMatchObject({
        estimated_cost: 0.0025, price_source: 'custom', cache: { status: 'miss', source_request_id: null },
        guardrails: { action: 'redacted', findings: [{ detector: 'email', stage: 'input', count: 1 }] },
        usage: { prompt_tokens: 200, completion_tokens: 30, total_tokens: 230 },
      });
    });

    it('never returns prompt or answer content', async () => {
      for (const path of ['/requests', `/requests/${session[0]}`, `/requests/${session[2]}`, '/traces/agent-run']) {
        const res = await o.manage.get(path);
        expect(res.status).toBe(200);
        const text = JSON.stringify(res.body);
        expect(text).not.toContain('secret prompt');
        expect(text).not.toContain('secret answer');
        expect(text).not.toMatch(/"request"|"response"|request_body|response_body/);
      }
    });

    it('GET /traces/{id}: every request of the session oldest first, with the run\'s cost and tokens', async () => {
      const res = await o.manage.get<Loose>('/traces/agent-run');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        id: 'agent-run', object: 'trace', request_count: 4, unpriced_request_count: 1,
        usage: { prompt_tokens: 305, completion_tokens: 55, total_tokens: 360 },
        requests: { object: 'list', has_more: false, next_cursor: '' },
      });
      expect(res.body.estimated_cost).toBeCloseTo(0.004, 10);
      expect(ids(res.body.requests)).toEqual(session);

      const first = await o.manage.get<Loose>('/traces/agent-run?limit=3');
      expect([ids(first.body.requests), first.body.requests.has_more]).toEqual([session.slice(0, 3), true]);
      expect(first.body.request_count).toBe(4);
      const rest = await o.manage.get<Loose>(`/traces/agent-run?limit=3&after=${first.body.requests.next_cursor}`);
      expect([ids(rest.body.requests), rest.body.requests.has_more]).toEqual([session.slice(3), false]);
    });

    it('answers 404 resource_not_found for another organization\'s request or trace, and unknown ones', async () => {
      const elsewhere = await org();
      const [theirs] = await insert(elsewhere, [{}]);
      for (const path of [`/requests/${theirs}`, `/traces/${foreignSession}`, '/traces/no-such-run', '/requests/req_nothing']) {
        const res = await o.manage.get(path);
        expect([path, res.status, res.body.error?.code]).toEqual([path, 404, 'resource_not_found']);
      }
      expect(ids((await o.manage.get<Loose>('/requests')).body)).not.toContain(theirs);
    });

    it('a project-restricted token sees only its projects\' requests', async () => {
      const otherProject = await createProject(db(), { orgId: o.orgId, name: 'other' });
      const [elsewhere] = await insert(o, [{ projectId: otherProject, sessionId: 'agent-run' }]);
      const { token } = await issueManagementToken(db(), { orgId: o.orgId, name: 'restricted', scopes: ['analytics:read'], projectIds: [o.projectId], createdByMemberId: o.memberId });
      const client = manageClient(f.api.url, token);
      expect(ids((await client.get<Loose>('/requests')).body)).not.toContain(elsewhere);
      expect((await client.get(`/requests/${elsewhere}`)).status).toBe(404);
      expect((await client.get<Loose>('/traces/agent-run')).body.request_count).toBe(4);
      expect((await o.manage.get<Loose>('/traces/agent-run')).body.request_count).toBe(5);
    });
  });

  describe('history window', () => {
    it('a trial organization sees 7 days, whatever `from` says, on every read', async () => {
      const o = await org('trial');
      const reader = (await o.newKey({ observabilityAccess: 'organization' })).secret;
      const [old, recent] = await insert(o, [{ ageMs: 8 * DAY, sessionId: 'long-run', cost: 1 }, { ageMs: 6 * DAY, sessionId: 'long-run', cost: 2 }]);
      const from = new Date(Date.now() - 30 * DAY).toISOString();
      expect(ids((await v1(reader, `/requests?from=${from}`)).body)).toEqual([recent]);
      expect((await v1(reader, `/requests/${old}`)).status).toBe(404);
      expect((await v1(reader, `/requests/${recent}`)).status).toBe(200);
      expect(ids((await o.manage.get<Loose>(`/requests?from=${from}`)).body)).toEqual([recent]);
      expect((await o.manage.get(`/requests/${old}`)).status).toBe(404);
      const trace = await o.manage.get<Loose>('/traces/long-run');
      expect([trace.body.request_count, trace.body.estimated_cost, ids(trace.body.requests)]).toEqual([1, 2, [recent]]);

      // Team: 30 days.
      await db().update(organizations).set({ plan: 'team' }).where(eq(organizations.id, o.orgId));
      expect(ids((await o.manage.get<Loose>(`/requests?from=${from}`)).body)).toEqual([recent, old]);
    });
  });

  describe('a real request through the gateway', () => {
    it('appears in the log with its attribution, and its bodies for a payload key', async () => {
      await f.connect('openai');
      const settings = await f.client.get('/org_settings');
      expect((await f.client.patch('/org_settings', { prompt_logging_enabled: true }, settings.etag!)).status).toBe(200);
      await f.settle();
      const secret = await f.key({ observability_access: 'scoped', payload_access: true });
      const session = `s-${Date.now()}`;
      const res = await f.chat(secret, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }], metadata: { session_id: session, user_id: 'u-1', tags: { feature: 'greeting' } } });
      expect(res.status).toBe(200);
      await f.api.runtime.deps.gateway.requestLog.flush();

      const list = await v1(secret, `/requests?session_id=${session}&tags.feature=greeting`);
      expect(ids(list.body)).toEqual([res.json.id]);
      const one = await v1(secret, `/requests/${res.json.id}`);
      expect(one.body).toMatchObject({
        id: res.json.id, model: 'gpt-4o-mini', provider: 'openai', status: 200, chain_position: expect.any(String),
        metadata: { user_id: 'u-1', session_id: session, tags: { feature: 'greeting' } },
        attempts: [expect.objectContaining({ outcome: 'ok', failure_kind: null })],
        request: { messages: [{ role: 'user', content: 'Say hello' }] },
      });
      expect(one.body.response).not.toBeNull();
      const managed = await f.client.get<Loose>(`/requests/${res.json.id}`);
      expect(managed.status).toBe(200);
      expect(managed.body).not.toHaveProperty('request');
    });
  });
});
