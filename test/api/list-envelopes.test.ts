import { jobs, requestLogs } from '../../core/db/schema';
import { newId } from '../../core/ids';
import { issueGatewayKey } from '../../core/tenancy/gateway-keys';
import type { Loose } from '../helpers/chat-fixture';
import { randomClientAddress } from '../helpers/harness';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

/**
 * Issue 20 item 4: spec 2.1 types the list envelope's `next_cursor` as a string. Every list
 * answers a string (empty when `has_more` is false), the OpenAPI document says so, and a
 * client passing the empty cursor back (as `after`, `cursor` or `starting_after`) reads the
 * first page instead of a 400.
 */
describe('list envelopes: next_cursor is always a string', () => {
  let f: ManagementFixture;
  let tenant: Tenant;
  /** A key that reads the whole organization's request log. */
  let reader: string;
  let ruleId: string;

  const manage = (t: Tenant) => ({
    get: (path: string) => fetch(`${f.api.url}/manage/v1${path}`, { headers: { authorization: `Bearer ${t.token}`, 'x-forwarded-for': randomClientAddress() } })
      .then(async (res) => ({ status: res.status, body: (await res.json()) as Loose })),
    post: (path: string, body: unknown) => fetch(`${f.api.url}/manage/v1${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() }, body: JSON.stringify(body),
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as Loose })),
  });
  const v1 = (secret: string, path: string) => fetch(`${f.api.url}/v1${path}`, { headers: { authorization: `Bearer ${secret}`, 'x-forwarded-for': randomClientAddress() } })
    .then(async (res) => ({ status: res.status, body: (await res.json()) as Loose }));

  beforeAll(async () => {
    f = await startManagementFixture();
    tenant = await createTenant(f.database.db, { rateLimitRpm: 50000, observabilityAccess: 'organization' });
    reader = tenant.key.secret;
    const rule = await manage(tenant).post('/end_user_cap_rules', { amount: '5', period: 'daily', behavior: 'block' });
    expect(rule.status).toBe(201);
    ruleId = rule.body.id;
  });
  afterAll(() => f?.close());

  it('answers an empty job list, and the last page of a job list, with next_cursor ""', async () => {
    const empty = await createTenant(f.database.db);
    const none = await v1(empty.key.secret, '/jobs');
    expect(none).toEqual({ status: 200, body: { object: 'list', data: [], has_more: false, next_cursor: '' } });

    const ids = [newId('job'), newId('job'), newId('job')];
    await f.database.db.insert(jobs).values(ids.map((id) => ({
      id, orgId: tenant.orgId, keyId: tenant.key.id, lineageId: tenant.key.id, projectId: tenant.projectId,
      type: 'video.generation', status: 'succeeded' as const, model: 'openai/sora-2', request: { prompt: 'listed' },
    })));
    const first = await v1(reader, '/jobs?limit=2');
    expect([first.status, first.body.has_more, typeof first.body.next_cursor, first.body.next_cursor.length > 0]).toEqual([200, true, 'string', true]);
    const last = await v1(reader, `/jobs?limit=2&after=${encodeURIComponent(first.body.next_cursor)}`);
    expect([last.status, last.body.data.length, last.body.has_more, last.body.next_cursor]).toEqual([200, 1, false, '']);
    // The empty cursor passed back reads the first page again, not a 400.
    const again = await v1(reader, '/jobs?limit=2&after=');
    expect([again.status, again.body.data.map((j: Loose) => j.id)]).toEqual([200, first.body.data.map((j: Loose) => j.id)]);
  });

  it('answers next_cursor "" on the last page of every management list and every one-page list', async () => {
    const t = manage(tenant);
    for (const path of ['/projects', '/gateway_keys', '/provider_connections', '/routes', '/model_prices', '/webhook_endpoints', '/end_user_cap_rules',
      '/guardrail_policies', '/member_budgets', '/webhook_deliveries', '/mcp_servers', '/mcp_server_tools', '/mcp_key_grants',
      '/provider_kinds', '/budget_status', '/audit_events', '/requests', `/end_user_cap_rules/${ruleId}/overrides`, '/usage']) {
      const res = await t.get(path);
      expect([path, res.status, res.body.has_more, res.body.next_cursor]).toEqual([path, 200, false, '']);
    }
    const console = await fetch(`${f.api.url}/console/providers/kinds`).then((r) => r.json() as Promise<Loose>);
    expect(console.next_cursor).toBe('');
  });

  it('reads the first page when a client passes the empty next_cursor back, whatever the parameter is called', async () => {
    const t = manage(tenant);
    await f.database.db.insert(requestLogs).values({
      id: newId('req'), orgId: tenant.orgId, keyId: tenant.key.id, projectId: tenant.projectId, endpoint: 'chat.completions',
      requestedModel: 'gpt-4o-mini', servedModel: 'gpt-4o-mini', provider: 'openai', status: 200, latencyMs: 10, sessionId: 'run-1', createdAt: new Date(),
    });
    for (const path of ['/projects?after=', '/gateway_keys?limit=1&after=', '/webhook_deliveries?after=', '/audit_events?cursor=', '/requests?after=',
      '/traces/run-1?after=', `/end_user_cap_rules/${ruleId}/overrides?after=`, `/end_user_cap_rules/${ruleId}/overrides?starting_after=`,
      `/end_user_cap_rules/${ruleId}/overrides?after=&starting_after=`]) {
      const res = await t.get(path);
      expect([path, res.status, res.body.error]).toEqual([path, 200, undefined]);
    }
    const requests = await v1(reader, '/requests?after=');
    expect([requests.status, requests.body.data.length]).toEqual([200, 1]);
    // A cursor that is not empty and not ours is still refused.
    expect((await t.get('/projects?after=nonsense')).status).toBe(400);
    expect((await t.get('/audit_events?cursor=nonsense')).status).toBe(400);
  });

  it('documents next_cursor as a string (not nullable) in the OpenAPI document', async () => {
    type Schema = { type?: string | string[]; anyOf?: unknown[]; oneOf?: unknown[]; nullable?: boolean; properties?: Record<string, Schema>; $ref?: string };
    const document = (await (await fetch(`${f.api.url}/manage/v1/openapi.json`)).json()) as {
      paths: Record<string, { get?: { responses: Record<string, { content: Record<string, { schema: Schema }> }> } }>;
      components?: { schemas?: Record<string, Schema> };
    };
    const resolve = (s: Schema): Schema => (s.$ref ? document.components!.schemas![s.$ref.split('/').pop()!]! : s);
    const lists = Object.entries(document.paths).filter(([, item]) => {
      const schema = item.get?.responses['200']?.content?.['application/json']?.schema;
      return schema && resolve(schema).properties?.has_more;
    });
    expect(lists.length).toBeGreaterThan(10);
    for (const [path, item] of lists) {
      const cursor = resolve(item.get!.responses['200']!.content['application/json']!.schema).properties!.next_cursor!;
      expect([path, cursor.type, cursor.anyOf, cursor.oneOf, cursor.nullable]).toEqual([path, 'string', undefined, undefined, undefined]);
    }
  });

  it('keeps a scoped key reading its request log with an empty after', async () => {
    const scoped = await issueGatewayKey(f.database.db, { orgId: tenant.orgId, projectId: tenant.projectId, label: 'scoped', observabilityAccess: 'scoped' });
    const res = await v1(scoped.secret, '/requests?after=');
    expect([res.status, res.body.next_cursor]).toEqual([200, '']);
  });
});
