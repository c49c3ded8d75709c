import { eq } from 'drizzle-orm';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents, idempotencyRecords } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { randomClientAddress, type TestApi } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

type Key = { id: string; object: string; version: number; secret?: string; label: string; allowed_ips: string[]; disabled: boolean; rate_limit_rpm: number };

describe('gateway_keys resource', () => {
  let api: TestApi;
  let database: DatabaseHandle;
  let tenant: Tenant;
  let client: ReturnType<typeof manageClient>;

  let fixture: ManagementFixture;

  beforeAll(async () => {
    fixture = await startManagementFixture();
    ({ api, database, tenant, client } = fixture);
  });
  afterAll(() => fixture.close());

  const models = (secret: string) =>
    fetch(`${api.url}/v1/models`, { headers: { authorization: `Bearer ${secret}`, 'x-forwarded-for': randomClientAddress() } });
  const settle = () => new Promise((r) => setTimeout(r, 200));

  it('returns the secret once on create; it works on /v1 and is never readable again', async () => {
    const created = await client.post<Key>('/gateway_keys', { label: 'svc', project_id: tenant.projectId });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ object: 'gateway_key', version: 1, managed_by: 'api', label: 'svc', rate_limit_rpm: 200 });
    expect(created.body.secret).toMatch(/^gwk_/);
    expect((await models(created.body.secret!)).status).toBe(200);
    const read = await client.get<Key>(`/gateway_keys/${created.body.id}`);
    expect(read.body.secret).toBeUndefined();
    expect(JSON.stringify(read.body)).not.toContain(created.body.secret!);
    const list = await client.get<{ data: Key[] }>('/gateway_keys');
    expect(JSON.stringify(list.body)).not.toContain(created.body.secret!);
    const audit = await database.db.select().from(auditEvents).where(eq(auditEvents.resourceId, created.body.id));
    expect(audit).toHaveLength(1);
    expect(JSON.stringify(audit)).not.toContain(created.body.secret!);
  });

  it('never stores a secret for Idempotency-Key replays: the replay answers the key without it', async () => {
    const headers = { 'idempotency-key': `key-once-${Date.now()}` };
    const first = await client.post<Key>('/gateway_keys', { label: 'idem', project_id: tenant.projectId }, headers);
    expect(first.body.secret).toMatch(/^gwk_/);
    const replay = await client.post<Key>('/gateway_keys', { label: 'idem', project_id: tenant.projectId }, headers);
    expect([replay.status, replay.body.id, replay.body.secret]).toEqual([201, first.body.id, undefined]);
    const rows = await database.db.select().from(idempotencyRecords).where(eq(idempotencyRecords.orgId, tenant.orgId));
    expect(JSON.stringify(rows)).not.toContain(first.body.secret!);
    const rotated = await client.post<Key>(`/gateway_keys/${first.body.id}/rotate`, { overlap_seconds: 0 }, { 'idempotency-key': `rot-${Date.now()}` });
    const stored = await database.db.select().from(idempotencyRecords).where(eq(idempotencyRecords.orgId, tenant.orgId));
    expect(rotated.body.secret).toMatch(/^gwk_/);
    expect(JSON.stringify(stored)).not.toContain(rotated.body.secret!);
  });

  it('stores allowed_ips canonically and refuses more than 32', async () => {
    const created = await client.post<Key>('/gateway_keys', { label: 'ips', project_id: tenant.projectId, allowed_ips: ['1.2.3.4', '10.9.8.7/8'] });
    expect(created.body.allowed_ips).toEqual(['1.2.3.4/32', '10.0.0.0/8']);
    const tooMany = await client.post('/gateway_keys', { label: 'ips', project_id: tenant.projectId, allowed_ips: Array.from({ length: 33 }, (_, i) => `10.0.0.${i}`) });
    expect(tooMany.status).toBe(400);
    const garbage = await client.post('/gateway_keys', { label: 'ips', project_id: tenant.projectId, allowed_ips: ['nope'] });
    expect(garbage.status).toBe(400);
  });

  it('takes rate_limit_rpm only from the tier list and providers only from provider kinds', async () => {
    const odd = await client.post('/gateway_keys', { label: 'r', project_id: tenant.projectId, rate_limit_rpm: 150 });
    expect([odd.status, odd.body.error?.type]).toEqual([400, 'invalid_request_error']);
    expect(odd.body.error?.message).toMatch(/rate_limit_rpm/);
    const tier = await client.post<Key>('/gateway_keys', { label: 'r', project_id: tenant.projectId, rate_limit_rpm: 1000 });
    expect(tier.body.rate_limit_rpm).toBe(1000);
    const provider = await client.post('/gateway_keys', { label: 'p', project_id: tenant.projectId, allowed_providers: ['openai', 'skynet'] });
    expect([provider.status, provider.body.error?.code]).toEqual([400, 'unknown_provider']);
  });

  it('disables and re-enables with a patch (403 key_disabled in between)', async () => {
    const { body: key } = await client.post<Key>('/gateway_keys', { label: 'toggle', project_id: tenant.projectId });
    const off = await client.patch<Key>(`/gateway_keys/${key.id}`, { disabled: true }, '"1"');
    expect(off.body).toMatchObject({ disabled: true, version: 2 });
    await settle();
    const refused = await models(key.secret!);
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('key_disabled');
    await client.patch(`/gateway_keys/${key.id}`, { disabled: false }, '"2"');
    await settle();
    expect((await models(key.secret!)).status).toBe(200);
  });

  it('revokes on DELETE: the key stops working and vanishes from list and read', async () => {
    const { body: key } = await client.post<Key>('/gateway_keys', { label: 'bye', project_id: tenant.projectId });
    const del = await client.delete(`/gateway_keys/${key.id}`, '"1"');
    expect(del.status).toBe(200);
    await settle();
    expect((await models(key.secret!)).status).toBe(401);
    expect((await client.get(`/gateway_keys/${key.id}`)).status).toBe(404);
    expect((await client.get<{ data: Key[] }>('/gateway_keys')).body.data.map((k) => k.id)).not.toContain(key.id);
  });

  it("hides other organizations' keys (404) and keeps project-restricted tokens in their projects (403)", async () => {
    const other = await createTenant(database.db);
    expect((await client.get(`/gateway_keys/${other.key.id}`)).status).toBe(404);
    const bad = await client.post('/gateway_keys', { label: 'x', project_id: other.projectId });
    expect(bad.status).toBe(400);

    const restricted = await issueManagementToken(database.db, {
      orgId: tenant.orgId, name: 'restricted', scopes: ['*'], createdByMemberId: tenant.memberId, projectIds: ['proj_elsewhere'],
    });
    const narrow = manageClient(api.url, restricted.token);
    const refused = await narrow.post('/gateway_keys', { label: 'x', project_id: tenant.projectId });
    expect([refused.status, refused.body.error?.code]).toEqual([403, 'project_restricted']);
    // Reading outside the token's projects looks like reading nothing (spec 7: 404 when not visible).
    const hidden = await narrow.get(`/gateway_keys/${tenant.key.id}`);
    expect([hidden.status, hidden.body.error?.code]).toEqual([404, 'resource_not_found']);
    expect((await narrow.get<{ data: Key[] }>('/gateway_keys')).body.data).toEqual([]);
  });

  it('refuses a token without the keys scope', async () => {
    const t = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'p', scopes: ['projects:read'], createdByMemberId: tenant.memberId });
    const res = await manageClient(api.url, t.token).get('/gateway_keys');
    expect([res.status, res.body.error?.code]).toEqual([403, 'insufficient_scope']);
  });

  it('validates environment against the organization', async () => {
    const ok = await client.post('/gateway_keys', { label: 'e', project_id: tenant.projectId, environment: 'staging' });
    expect(ok.status).toBe(201);
    const bad = await client.post('/gateway_keys', { label: 'e', project_id: tenant.projectId, environment: 'moon' });
    expect(bad.status).toBe(400);
  });
});
