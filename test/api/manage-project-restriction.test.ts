import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';

type Resource = { id: string; version: number; [field: string]: unknown };

let counter = 0;
const unique = (p: string) => `${p}-${Date.now().toString(36)}-${counter++}`;

/**
 * Issue 10, section 3: a management token restricted to projects reads organization-wide
 * types but cannot write them (403 `project_restricted`, nothing changed); inside its projects
 * it works as before.
 */
describe('project-restricted management tokens', () => {
  let f: ManagementFixture;
  let narrow: ReturnType<typeof manageClient>;
  const made: Record<string, Resource> = {};

  beforeAll(async () => {
    f = await startManagementFixture();
    const { client, tenant } = f;
    const created = async (path: string, body: Record<string, unknown>) => {
      const res = await client.post<Resource>(path, body);
      if (res.status !== 201) throw new Error(JSON.stringify(res.body));
      return res.body;
    };
    made.provider_connections = await created('/provider_connections', { kind: 'openai', name: unique('conn'), secret: 'sk-live-not-a-real-one' });
    made.routes = await created('/routes', { slug: unique('route'), targets: [{ connection_id: made.provider_connections.id, model: 'gpt-4o-mini' }] });
    made.model_prices = await created('/model_prices', { model: unique('model'), input_per_million: 0.15, output_per_million: 0.6 });
    made.webhook_endpoints = await created('/webhook_endpoints', { url: 'https://hooks.example.com/gw', events: ['job.succeeded'] });
    made.member_budgets = (await client.get<Resource>(`/member_budgets/${tenant.memberId}`)).body;
    made.org_settings = (await client.get<Resource>('/org_settings')).body;
    const token = await issueManagementToken(f.database.db, {
      orgId: tenant.orgId, name: 'restricted', scopes: ['*'], createdByMemberId: tenant.memberId, projectIds: [tenant.projectId],
    });
    narrow = manageClient(f.api.url, token.token);
  });
  afterAll(() => f.close());

  const refused = (res: { status: number; body: { error?: { type: string; code: string | null } } }) =>
    expect([res.status, res.body.error?.type, res.body.error?.code]).toEqual([403, 'permission_denied', 'project_restricted']);

  /** Organization-wide types: where they are read, and one write of each kind they support. */
  const ORG_WIDE: Array<{ type: string; read: () => string; create?: () => Record<string, unknown>; patch?: Record<string, unknown>; remove?: boolean; action?: [string, Record<string, unknown>] }> = [
    {
      type: 'provider_connections', read: () => `/provider_connections/${made.provider_connections!.id}`,
      create: () => ({ kind: 'openai', name: unique('conn'), secret: 'sk-live-not-a-real-one' }),
      patch: { timeout_ms: 30_000 }, remove: true, action: ['credential', { secret: 'sk-other' }],
    },
    {
      type: 'routes', read: () => `/routes/${made.routes!.id}`,
      create: () => ({ slug: unique('route'), targets: [{ connection_id: made.provider_connections!.id, model: 'gpt-4o-mini' }] }),
      patch: { max_retries: 3 }, remove: true,
    },
    {
      type: 'model_prices', read: () => `/model_prices/${made.model_prices!.id}`,
      create: () => ({ model: unique('model'), input_per_million: 1, output_per_million: 2 }),
      patch: { note: 'mine now' }, remove: true,
    },
    {
      type: 'webhook_endpoints', read: () => `/webhook_endpoints/${made.webhook_endpoints!.id}`,
      create: () => ({ url: 'https://hooks.example.com/other' }),
      remove: true, action: ['rotate_secret', {}],
    },
    { type: 'member_budgets', read: () => `/member_budgets/${made.member_budgets!.id}`, patch: { spend_limit: { monthly: 5, behavior: 'block' } } },
    { type: 'org_settings', read: () => '/org_settings', patch: { monthly_target: 123 } },
  ];

  describe.each(ORG_WIDE)('$type', (c) => {
    it('reads (item and list) as an unrestricted token does', async () => {
      const item = await narrow.get<Resource>(c.read());
      expect(item.status).toBe(200);
      expect(item.body.id).toBe(made[c.type]!.id);
      if (c.type !== 'org_settings') {
        const list = await narrow.get<{ data: Resource[] }>(`/${c.type}`);
        expect(list.status).toBe(200);
        expect(list.body.data.map((r) => r.id)).toContain(made[c.type]!.id);
      }
    });

    it('refuses every write with 403 project_restricted and changes nothing', async () => {
      const before = await f.client.get<Resource>(c.read());
      const listBefore = c.create ? (await f.client.get<{ data: Resource[] }>(`/${c.type}`)).body.data.length : 0;
      const path = c.read();
      if (c.create) refused(await narrow.post(`/${c.type}`, c.create()));
      if (c.patch) refused(await narrow.patch(c.type === 'org_settings' ? '/org_settings' : path, c.patch, `"${before.body.version}"`));
      if (c.remove) refused(await narrow.delete(path, `"${before.body.version}"`));
      if (c.action) refused(await narrow.post(`${path}/${c.action[0]}`, c.action[1]));
      const after = await f.client.get<Resource>(c.read());
      expect(after.body).toEqual(before.body);
      if (c.create) expect((await f.client.get<{ data: Resource[] }>(`/${c.type}`)).body.data.length).toBe(listBefore);
    });
  });

  it('cannot create a project (every new project is outside its list)', async () => {
    const before = await f.client.get<{ data: Resource[] }>('/projects');
    refused(await narrow.post('/projects', { name: unique('project') }));
    expect((await f.client.get<{ data: Resource[] }>('/projects')).body.data.length).toBe(before.body.data.length);
  });

  it('works as before inside its projects', async () => {
    const project = await narrow.get<Resource>(`/projects/${f.tenant.projectId}`);
    expect(project.status).toBe(200);
    const renamed = await narrow.patch<Resource>(`/projects/${f.tenant.projectId}`, { name: 'renamed by the narrow token' }, `"${project.body.version}"`);
    expect([renamed.status, renamed.body.name]).toEqual([200, 'renamed by the narrow token']);
    const key = await narrow.post<Resource>('/gateway_keys', { label: unique('key'), project_id: f.tenant.projectId });
    expect(key.status).toBe(201);
    const patched = await narrow.patch<Resource>(`/gateway_keys/${key.body.id}`, { label: 'relabelled' }, `"${key.body.version}"`);
    expect([patched.status, patched.body.label]).toEqual([200, 'relabelled']);
    const revoked = await narrow.delete(`/gateway_keys/${key.body.id}`, `"${patched.body.version}"`);
    expect(revoked.status).toBe(200);
    // Its list shows only its projects.
    await f.client.post('/projects', { name: unique('elsewhere') });
    const projects = await narrow.get<{ data: Resource[] }>('/projects');
    expect(projects.body.data.map((p) => p.id)).toEqual([f.tenant.projectId]);
  });
});
