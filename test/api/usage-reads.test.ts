import { and, eq, inArray } from 'drizzle-orm';
import { organizations, requestLogs, usageHourly } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { randomClientAddress } from '../helpers/harness';
import { manageClient } from '../helpers/manage-client';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

type LogRow = typeof requestLogs.$inferSelect;
type Sums = { requests: number; prompt_tokens: number; completion_tokens: number; total_tokens: number; cost: number; unpriced_requests: number };

const zero = (): Sums => ({ requests: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0, unpriced_requests: 0 });
const tokens = (row: LogRow, field: string) => Number((row.usage as Loose | null)?.[field] ?? 0);

/** What the rollup should hold for these request-log rows, worked out from the rows themselves. */
function sumRows(rows: LogRow[]): Sums {
  const s = zero();
  for (const r of rows) {
    s.requests++;
    s.prompt_tokens += tokens(r, 'prompt_tokens');
    s.completion_tokens += tokens(r, 'completion_tokens');
    s.total_tokens += tokens(r, 'total_tokens');
    s.cost += r.cost ?? 0;
    if (r.cost === null && r.status >= 200 && r.status < 300) s.unpriced_requests++;
  }
  return s;
}

function expectSums(actual: Loose, expected: Sums): void {
  const { cost, ...counts } = expected;
  expect(actual).toMatchObject(counts);
  expect(actual.cost).toBeCloseTo(cost, 12);
}

/** A report's buckets summed per group (buckets may straddle an hour boundary during the run). */
function byGroup(report: Loose, field: string): Map<string | null, Sums> {
  const out = new Map<string | null, Sums>();
  for (const b of report.data as Loose[]) {
    const k = b.group[field] as string | null;
    const s = out.get(k) ?? zero();
    for (const c of Object.keys(s) as Array<keyof Sums>) s[c] += b[c];
    out.set(k, s);
  }
  return out;
}

function rowsByGroup(rows: LogRow[], pick: (r: LogRow) => string | null): Map<string | null, Sums> {
  const groups = new Map<string | null, LogRow[]>();
  for (const r of rows) groups.set(pick(r), [...(groups.get(pick(r)) ?? []), r]);
  return new Map([...groups].map(([k, v]) => [k, sumRows(v)]));
}

function expectSameGroups(actual: Map<string | null, Sums>, expected: Map<string | null, Sums>): void {
  expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
  for (const [k, sums] of expected) expectSums(actual.get(k)!, sums);
}

describe('usage reads: GET /v1/usage and GET /manage/v1/usage', () => {
  let f: ChatFixture;
  const keys: Record<'org' | 'scoped' | 'other' | 'none', { id: string; secret: string }> = {} as never;
  let rotated: { id: string; secret: string };
  const ids: string[] = [];
  let rows: LogRow[] = [];
  // An explicit span, so both endpoints are asked exactly the same question.
  const from = Math.floor(Date.now() / 1000) - 86_400;
  const to = Math.floor(Date.now() / 1000) + 7_200;
  const span = `from=${from}&to=${to}`;

  const usage = async (secret: string, query: string) => {
    const res = await fetch(`${f.api.url}/v1/usage?${query}`, { headers: { authorization: `Bearer ${secret}`, 'x-forwarded-for': randomClientAddress() } });
    const text = await res.text();
    return { status: res.status, type: res.headers.get('content-type'), text, json: (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) as Loose : {} };
  };
  const newKey = async (settings: Record<string, unknown>) => {
    const res = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: `usage ${Math.random()}`, project_id: f.tenant.projectId, ...settings });
    expect(res.status).toBe(201);
    return { id: res.body.id, secret: res.body.secret };
  };
  const ask = async (secret: string, model: string, metadata?: Record<string, unknown>, content = 'Say hello') => {
    const res = await f.chat(secret, { model, messages: [{ role: 'user', content }], ...(metadata && { metadata }) });
    ids.push(res.headers.get('x-gw-request-id')!);
    return res;
  };

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    await f.connect('anthropic');
    // A custom connection's model without a price is unpriced (cost null).
    const custom = await f.client.post('/provider_connections', {
      kind: 'custom', name: 'selfhosted', secret: 'sk-sandbox-x', config: { base_url: `${f.sandbox.url}/openai/v1` }, model_map: { 'house-model': 'house-model' },
    });
    expect(custom.status).toBe(201);
    await f.settle();
    keys.org = await newKey({ observability_access: 'organization' });
    keys.scoped = await newKey({ observability_access: 'scoped' });
    keys.other = await newKey({ observability_access: 'scoped' });
    keys.none = await newKey({});

    expect((await ask(keys.org.secret, 'openai/gpt-4o-mini', { user_id: 'u1', tags: { team: 'a', env: 'prod' } })).status).toBe(200);
    expect((await ask(keys.org.secret, 'openai/gpt-4o-mini', { user_id: 'u2', tags: { team: 'a' } }, 'Say hello twice please')).status).toBe(200);
    expect((await ask(keys.org.secret, 'anthropic/claude-3-5-haiku-latest', { tags: { team: 'b' } })).status).toBe(200);
    expect((await ask(keys.scoped.secret, 'custom/house-model', { user_id: 'u1' })).status).toBe(200);
    expect((await ask(keys.scoped.secret, 'openai/gpt-4o-mini', { tags: { env: 'dev' } })).status).toBe(200);
    expect((await ask(keys.other.secret, 'custom/house-model')).status).toBe(200);
    // A failed request: counted as a request, neither priced nor "unpriced".
    expect((await ask(keys.org.secret, 'openai/gpt-4o-mini', undefined, 'Say hello [sandbox status=400]')).status).toBeGreaterThanOrEqual(400);

    // The scoped key is rotated: its successor shares the lineage and makes one more request.
    const r = await f.client.post<{ id: string; secret: string }>(`/gateway_keys/${keys.scoped.id}/rotate`, { overlap_seconds: 0 }, { 'idempotency-key': `rot-${Date.now()}` });
    expect(r.status).toBe(200);
    rotated = { id: r.body.id, secret: r.body.secret };
    expect((await ask(rotated.secret, 'openai/gpt-4o-mini', { user_id: 'u3' })).status).toBe(200);

    // Rows reach Postgres in batches: wait until every one of them is there.
    const deadline = Date.now() + 15_000;
    for (;;) {
      rows = await f.database.db.select().from(requestLogs).where(and(eq(requestLogs.orgId, f.tenant.orgId), inArray(requestLogs.id, ids)));
      if (rows.length === ids.length || Date.now() > deadline) break;
      await new Promise((done) => setTimeout(done, 100));
    }
    expect(rows).toHaveLength(ids.length);
    rows = await f.database.db.select().from(requestLogs).where(eq(requestLogs.orgId, f.tenant.orgId));
  }, 60_000);
  afterAll(() => f.close());

  it('the rows have what the checks below rely on: priced, unpriced and failed requests', () => {
    expect(rows.filter((r) => r.cost === null && r.status === 200)).toHaveLength(2);
    expect(rows.filter((r) => r.status >= 400)).toHaveLength(1);
    expect(rows.filter((r) => (r.cost ?? 0) > 0).length).toBeGreaterThanOrEqual(4);
  });

  it('hour buckets: totals equal the request-log rows (tokens, cost, unpriced), buckets on UTC hours', async () => {
    const res = await usage(keys.org.secret, `bucket=hour&${span}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ object: 'list', bucket: 'hour', group_by: [], has_more: false, to });
    expect(res.json.data.length).toBeGreaterThanOrEqual(1);
    for (const b of res.json.data as Loose[]) {
      expect(b.bucket_start % 3600).toBe(0);
      expect(b.bucket_end - b.bucket_start).toBe(3600);
      expect(b).not.toHaveProperty('group');
    }
    expectSums(res.json.totals, sumRows(rows));
    const summed = zero();
    for (const b of res.json.data as Loose[]) for (const c of Object.keys(summed) as Array<keyof Sums>) summed[c] += b[c];
    expectSums(summed, sumRows(rows));
    expect(res.json.totals.unpriced_requests).toBe(2);
  });

  it('day buckets sum the hours on UTC days', async () => {
    const res = await usage(keys.org.secret, `bucket=day&${span}`);
    expect(res.status).toBe(200);
    for (const b of res.json.data as Loose[]) {
      expect(b.bucket_start % 86_400).toBe(0);
      expect(b.bucket_end - b.bucket_start).toBe(86_400);
    }
    expectSums(res.json.totals, sumRows(rows));
  });

  it.each([
    ['model', (r: LogRow) => r.requestedModel],
    ['provider', (r: LogRow) => r.provider],
    ['key', (r: LogRow) => r.keyId],
    ['project', (r: LogRow) => r.projectId],
    ['user_id', (r: LogRow) => r.userId],
    ['tags.team', (r: LogRow) => r.tags.team ?? null],
    ['tags.env', (r: LogRow) => r.tags.env ?? null],
  ])('group_by=%s: each group equals its request-log rows', async (field, pick) => {
    const res = await usage(keys.org.secret, `bucket=hour&group_by=${field}&${span}`);
    expect(res.status).toBe(200);
    expect(res.json.group_by).toEqual([field]);
    expectSameGroups(byGroup(res.json, field), rowsByGroup(rows, pick));
  });

  it('group_by several fields at once, and requests without a tag fall in a null group', async () => {
    const res = await usage(keys.org.secret, `bucket=day&group_by=model,tags.team&${span}`);
    expect(res.status).toBe(200);
    const groups = (res.json.data as Loose[]).map((b) => b.group);
    expect(groups).toContainEqual({ model: 'openai/gpt-4o-mini', 'tags.team': 'a' });
    expect(groups).toContainEqual({ model: 'custom/house-model', 'tags.team': null });
    expectSums(res.json.totals, sumRows(rows));
  });

  it('format=csv: a header row and the same figures, as text/csv', async () => {
    const json = (await usage(keys.org.secret, `bucket=hour&group_by=model&${span}`)).json;
    const res = await usage(keys.org.secret, `bucket=hour&group_by=model&${span}&format=csv`);
    expect(res.status).toBe(200);
    expect(res.type).toMatch(/^text\/csv/);
    const lines = res.text.trim().split(/\r?\n/);
    expect(lines[0]).toBe('bucket_start,bucket_end,model,requests,prompt_tokens,completion_tokens,total_tokens,cost,unpriced_requests');
    expect(lines).toHaveLength(json.data.length + 1);
    lines.slice(1).forEach((line, i) => {
      const b = json.data[i] as Loose;
      const cells = line.split(',');
      expect(Date.parse(cells[0]!) / 1000).toBe(b.bucket_start);
      expect(Date.parse(cells[1]!) / 1000).toBe(b.bucket_end);
      expect(cells[2]).toBe(b.group.model ?? '');
      expect(cells.slice(3).map(Number)).toEqual([b.requests, b.prompt_tokens, b.completion_tokens, b.total_tokens, b.cost, b.unpriced_requests]);
    });
  });

  it('observability_access: none is refused, scoped sees its own lineage (rotated keys too), organization everything', async () => {
    const none = await usage(keys.none.secret, span);
    expect(none.status).toBe(403);
    expect(none.json.error).toMatchObject({ type: 'permission_denied' });

    const lineage = rows.filter((r) => r.keyId === keys.scoped.id || r.keyId === rotated.id);
    expect(lineage).toHaveLength(3);
    const scoped = await usage(rotated.secret, `bucket=day&group_by=key&${span}`);
    expect(scoped.status).toBe(200);
    expectSums(scoped.json.totals, sumRows(lineage));
    expect([...byGroup(scoped.json, 'key').keys()].sort()).toEqual([keys.scoped.id, rotated.id].sort());

    const other = await usage(keys.other.secret, span);
    expectSums(other.json.totals, sumRows(rows.filter((r) => r.keyId === keys.other.id)));
  });

  it('invalid parameters are 400 invalid_request_error', async () => {
    for (const query of ['bucket=week', 'from=yesterday', 'to=2025-13-45', 'group_by=color', 'group_by=tags.', `from=${to}&to=${from}`, 'format=xml', 'bucket=hour&bucket=day']) {
      const res = await usage(keys.org.secret, query);
      expect({ query, status: res.status, type: res.json.error?.type }).toEqual({ query, status: 400, type: 'invalid_request_error' });
    }
  });

  describe('management', () => {
    it('GET /manage/v1/usage answers what /v1/usage answers an organization key, as JSON', async () => {
      for (const query of [`bucket=hour&${span}`, `bucket=day&group_by=provider,user_id&${span}`, `bucket=hour&group_by=tags.team&${span}`]) {
        const manage = await f.client.get(`/usage?${query}`);
        expect(manage.status).toBe(200);
        const gateway = await usage(keys.org.secret, query);
        expect(manage.body).toEqual(gateway.json);
      }
      // ISO 8601 bounds read the same as Unix seconds.
      const iso = await f.client.get(`/usage?bucket=hour&from=${new Date(from * 1000).toISOString()}&to=${new Date(to * 1000).toISOString()}`);
      expect(iso.body).toEqual((await f.client.get(`/usage?bucket=hour&${span}`)).body);
    });

    it('refuses format=csv with 400', async () => {
      const res = await f.client.get(`/usage?format=csv&${span}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error' });
    });

    it('needs analytics:read (or *:read); checked before parameters are read', async () => {
      const issue = async (scopes: string[]) => manageClient(f.api.url, (await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: scopes.join(' '), scopes, createdByMemberId: f.tenant.memberId })).token);
      const analytics = await issue(['analytics:read']);
      expect((await analytics.get(`/usage?${span}`)).status).toBe(200);
      expect((await (await issue(['*:read'])).get(`/usage?${span}`)).status).toBe(200);
      const without = await issue(['organization:read', 'budgets:read']);
      for (const query of [span, 'bucket=nonsense', 'format=csv']) {
        const res = await without.get(`/usage?${query}`);
        expect(res.status).toBe(403);
        expect(res.body.error).toMatchObject({ type: 'permission_denied', code: 'insufficient_scope' });
      }
    });

    it('is in the OpenAPI document', async () => {
      const doc = await (await fetch(`${f.api.url}/manage/v1/openapi.json`)).json() as Loose;
      expect(doc.paths['/usage'].get.operationId).toBe('getUsage');
    });
  });

  it("history window: nothing older than the plan's window is counted, whatever `from` says", async () => {
    const hour = (hoursAgo: number) => new Date(Math.floor(Date.now() / 3_600_000 - hoursAgo) * 3_600_000);
    const base = { orgId: f.tenant.orgId, keyId: keys.org.id, projectId: f.tenant.projectId, model: 'history-model', provider: 'openai', userId: '', tags: {} };
    await f.database.db.insert(usageHourly).values([
      { ...base, hour: hour(3 * 24), requests: 1, promptTokens: 10, completionTokens: 5, totalTokens: 15, cost: 0.5 },
      { ...base, hour: hour(20 * 24), requests: 2, promptTokens: 20, completionTokens: 10, totalTokens: 30, cost: 1 },
      { ...base, hour: hour(60 * 24), requests: 4, promptTokens: 40, completionTokens: 20, totalTokens: 60, cost: 2, unpricedRequests: 1 },
    ]);
    const old = `bucket=day&group_by=model&from=${Math.floor(Date.now() / 1000) - 200 * 86_400}&to=${from}`;
    const historyRequests = async (read: () => Promise<Loose>) => byGroup(await read(), 'model').get('history-model')?.requests ?? 0;
    const viaKey = () => usage(keys.org.secret, old).then((r) => r.json);
    const viaManage = () => f.client.get(`/usage?${old}`).then((r) => r.body as Loose);
    const setPlan = (plan: 'trial' | 'team' | 'business') => f.database.db.update(organizations).set({ plan }).where(eq(organizations.id, f.tenant.orgId));
    try {
      // business: 90 days.
      expect(await historyRequests(viaKey)).toBe(7);
      expect(await historyRequests(viaManage)).toBe(7);
      await setPlan('team');
      expect(await historyRequests(viaKey)).toBe(3);
      await setPlan('trial');
      expect(await historyRequests(viaKey)).toBe(1);
      expect(await historyRequests(viaManage)).toBe(1);
      const report = await viaManage();
      expect(report.from).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) - 7 * 86_400);
      expect(report.totals).toMatchObject({ requests: 1, total_tokens: 15, cost: 0.5, unpriced_requests: 0 });
    } finally {
      await setPlan('business');
    }
  });
});
