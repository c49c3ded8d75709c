import { issueManagementToken } from '../../core/tenancy/management-tokens';
import type { Loose } from '../helpers/chat-fixture';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';

const CONNECTION_SECRET = 'sk-export-connection-secret-0001';
const FALLBACK_SECRET = 'sk-export-fallback-secret-0002';

type ExportDoc = { object: string; format_version: number; organization_id: string; restore_order: string[]; resources: Record<string, Loose> };

/** `GET /manage/v1/export` (issue 13): the whole configuration, each type exactly as GET shows it, without secrets. */
describe('GET /manage/v1/export', () => {
  let f: ManagementFixture;
  const revealed: string[] = [];
  let ruleId: string;

  beforeAll(async () => {
    f = await startManagementFixture({ env: { GW_ALLOW_PRIVATE_NETWORK: 'true' } });
    const c = f.client;
    const project = await c.post<{ id: string }>('/projects', { name: 'Exported', spend_limit: { monthly: 250, behavior: 'block' } });
    expect(project.status).toBe(201);
    const connection = await c.post<{ id: string }>('/provider_connections', { kind: 'openai', name: 'export conn', secret: CONNECTION_SECRET, fallback_secrets: [FALLBACK_SECRET] });
    expect(connection.status).toBe(201);
    expect((await c.post('/routes', { slug: 'export-route', targets: [{ connection_id: connection.body.id, model: 'gpt-4o-mini' }] })).status).toBe(201);
    expect((await c.post('/model_prices', { model: 'openai/gpt-4o', provider: 'openai', input_per_million: 1, output_per_million: 2 })).status).toBe(201);
    const key = await c.post<{ id: string; secret: string }>('/gateway_keys', { label: 'exported key', project_id: project.body.id, credit_limit: { amount: 10, period: 'monthly' } });
    expect(key.status).toBe(201);
    revealed.push(key.body.secret);
    const endpoint = await c.post<{ secret: string }>('/webhook_endpoints', { url: 'https://hooks.example.com/export' });
    expect(endpoint.status).toBe(201);
    revealed.push(endpoint.body.secret);
    const settings = await c.get('/org_settings');
    expect((await c.patch('/org_settings', { hard_cap: { monthly: 900, behavior: 'alert' } }, settings.etag!)).status).toBe(200);
    const budget = await c.get(`/member_budgets/${f.tenant.memberId}`);
    expect((await c.patch(`/member_budgets/${f.tenant.memberId}`, { spend_limit: { monthly: 70, behavior: 'block' } }, budget.etag!)).status).toBe(200);
    const rule = await c.post<{ id: string }>('/end_user_cap_rules', { amount: '3', period: 'weekly', behavior: 'block' });
    expect(rule.status).toBe(201);
    ruleId = rule.body.id;
    const put = await fetch(`${f.api.url}/manage/v1/end_user_cap_rules/${ruleId}/overrides/vip`, {
      method: 'PUT', headers: { authorization: `Bearer ${f.tenant.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ amount: '30' }),
    });
    expect(put.status).toBeLessThan(300);
    expect((await c.post('/guardrail_policies', { target: 'organization', rules: [{ detector: 'email', stage: 'input', action: 'redact' }] })).status).toBe(201);
    expect((await c.post('/decision_policies', { slug: 'export-triage', model: 'export-route', output_schema: { type: 'object' }, fallback: {} })).status).toBe(201);
  });
  afterAll(() => f?.close());

  /** The raw answer, as a client saving it to a file would see it. */
  const exported = async () => {
    const res = await fetch(`${f.api.url}/manage/v1/export`, { headers: { authorization: `Bearer ${f.tenant.token}` } });
    return { status: res.status, text: await res.text() };
  };

  it('carries every resource type exactly as GET shows it, in restore order, with a format version', async () => {
    const { status, text } = await exported();
    expect(status).toBe(200);
    const doc = JSON.parse(text) as ExportDoc;
    expect(doc).toMatchObject({ object: 'configuration_export', format_version: 1, organization_id: f.tenant.orgId });
    expect(doc.restore_order).toEqual([
      'org_settings', 'projects', 'provider_connections', 'model_prices', 'routes', 'member_budgets',
      'gateway_keys', 'webhook_endpoints', 'notification_channels', 'notification_rules', 'cost_centers', 'cost_center_rules', 'commitments', 'end_user_cap_rules', 'end_user_cap_overrides', 'guardrail_policies',
      'decision_policies', 'mcp_servers', 'mcp_server_tools', 'mcp_key_grants',
    ]);
    expect(Object.keys(doc.resources)).toEqual(doc.restore_order);
    // No data operation rides along.
    for (const op of ['budget_status', 'audit_events', 'usage', 'requests', 'webhook_deliveries', 'findings']) expect(doc.resources[op]).toBeUndefined();

    expect(doc.resources.org_settings).toEqual((await f.client.get('/org_settings')).body);
    for (const type of doc.restore_order.filter((t) => t !== 'org_settings' && t !== 'end_user_cap_overrides')) {
      const listed = await f.client.get<{ data: Loose[] }>(`/${type}?limit=100`);
      expect([type, doc.resources[type]]).toEqual([type, listed.body.data]);
    }
    const overrides = await f.client.get<{ data: Loose[] }>(`/end_user_cap_rules/${ruleId}/overrides`);
    expect(doc.resources.end_user_cap_overrides).toEqual(overrides.body.data);
    expect(doc.resources.end_user_cap_overrides).toMatchObject([{ rule_id: ruleId, end_user_id: 'vip', amount: '30' }]);
    expect(doc.resources.projects).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'Exported', spend_limit: { monthly: 250, behavior: 'block' } })]));
    expect(doc.resources.gateway_keys).toEqual(expect.arrayContaining([expect.objectContaining({ label: 'exported key', credit_limit: { amount: 10, period: 'monthly' } })]));
  });

  it('holds no secret or sealed value', async () => {
    const { text } = await exported();
    for (const secret of [...revealed, CONNECTION_SECRET, FALLBACK_SECRET]) expect(text).not.toContain(secret);
    // (A route's failover policy has a `credential` failure kind: a name, not a secret.)
    expect(text).not.toMatch(/"(secret|secrets|fallback_secrets|secret_sealed|secret_hash|key_hash)"\s*:/);
    expect(text).not.toMatch(/sealed/i);
  });

  it('is byte-identical for an unchanged configuration, so exports diff cleanly', async () => {
    const a = await exported();
    const b = await exported();
    expect(a.text).toBe(b.text);
    expect(a.text.split('\n').length).toBeGreaterThan(50); // pretty-printed: one value a line
  });

  it('needs the read scope of every type it carries (`*:read` does), and an unrestricted token', async () => {
    const fetchWith = async (token: string) => {
      const res = await manageClient(f.api.url, token).get<Loose>('/export');
      return [res.status, res.body.error?.code ?? null];
    };
    const partial = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'projects only', scopes: ['projects:read', 'keys:read'], createdByMemberId: f.tenant.memberId });
    expect(await fetchWith(partial.token)).toEqual([403, 'insufficient_scope']);
    const reader = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'reader', scopes: ['*:read'], createdByMemberId: f.tenant.memberId });
    expect(await fetchWith(reader.token)).toEqual([200, null]);
    const restricted = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'restricted', scopes: ['*:read'], createdByMemberId: f.tenant.memberId, projectIds: [f.tenant.projectId] });
    expect(await fetchWith(restricted.token)).toEqual([403, 'project_restricted']);
  });

  it('never shows another organization\'s configuration', async () => {
    const stranger = await createTenant(f.database.db);
    const res = await manageClient(f.api.url, stranger.token).get<ExportDoc>('/export');
    expect(res.status).toBe(200);
    expect(res.body.organization_id).toBe(stranger.orgId);
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(f.tenant.orgId);
    expect(text).not.toContain(ruleId);
    expect(text).not.toContain('export-route');
    expect(res.body.resources.projects).toHaveLength(1);
  });
});
