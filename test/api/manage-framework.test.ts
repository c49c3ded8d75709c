import { and, eq } from 'drizzle-orm';
import fc from 'fast-check';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { addMember } from '../../core/tenancy/organizations';
import { randomClientAddress, type TestApi } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

type Project = { id: string; object: string; version: number; managed_by: string; name: string; slug: string; archived: boolean; model_allowlist: string[] };

/** The resource framework through its first resource, `projects` (spec 4.4, 2.6, 7, 9). */
describe('management resource framework: projects', () => {
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

  async function newProject(name = 'Proj') {
    const res = await client.post<Project>('/projects', { name });
    expect(res.status).toBe(201);
    return res;
  }

  it('creates, reads and lists with id, object, version, managed_by and an ETag', async () => {
    const created = await client.post<Project>('/projects', { name: 'Alpha', slug: 'alpha' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: expect.stringMatching(/^proj_/), object: 'project', version: 1, managed_by: 'api', name: 'Alpha', slug: 'alpha', archived: false });
    expect(created.etag).toBe('"1"');
    const read = await client.get<Project>(`/projects/${created.body.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(created.body);
    expect(read.etag).toBe('"1"');
    const list = await client.get<{ object: string; data: Project[]; has_more: boolean }>('/projects');
    expect(list.body.object).toBe('list');
    expect(list.body.data.map((p) => p.id)).toContain(created.body.id);
  });

  it('patches with a good If-Match, bumping the version', async () => {
    const { body: p } = await newProject();
    const res = await client.patch<Project>(`/projects/${p.id}`, { name: 'Renamed', model_allowlist: ['openai/gpt-4o'] }, '"1"');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Renamed', model_allowlist: ['openai/gpt-4o'], version: 2 });
    expect(res.etag).toBe('"2"');
  });

  it('refuses PATCH and DELETE without If-Match (400 if_match_required) or with a malformed one (400 invalid_if_match)', async () => {
    const { body: p } = await newProject();
    const missing = await client.patch(`/projects/${p.id}`, { name: 'x' });
    expect([missing.status, missing.body.error?.code]).toEqual([400, 'if_match_required']);
    const malformed = await client.patch(`/projects/${p.id}`, { name: 'x' }, '1');
    expect([malformed.status, malformed.body.error?.code]).toEqual([400, 'invalid_if_match']);
    const del = await client.delete(`/projects/${p.id}`);
    expect([del.status, del.body.error?.code]).toEqual([400, 'if_match_required']);
    expect((await client.get<Project>(`/projects/${p.id}`)).body.version).toBe(1);
  });

  it('answers a stale If-Match with 409 version_conflict carrying the current version in ETag', async () => {
    const { body: p } = await newProject();
    await client.patch(`/projects/${p.id}`, { name: 'v2' }, '"1"');
    const stale = await client.patch(`/projects/${p.id}`, { name: 'lost' }, '"1"');
    expect(stale.status).toBe(409);
    expect(stale.body.error).toEqual({ message: expect.any(String), type: 'conflict', code: 'version_conflict' });
    expect(stale.etag).toBe('"2"');
    expect((await client.get<Project>(`/projects/${p.id}`)).body.name).toBe('v2');
  });

  it('property: a stale If-Match never changes the resource', async () => {
    const client = manageClient(api.url, (await createTenant(database.db)).token);
    const { body: p } = await client.post<Project>('/projects', { name: 'prop' });
    await client.patch(`/projects/${p.id}`, { name: 'current' }, '"1"');
    const before = (await client.get<Project>(`/projects/${p.id}`)).body;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 1000 }).filter((v) => v !== before.version),
        fc.record({ name: fc.string({ minLength: 1, maxLength: 80 }).filter((s) => s.trim().length > 0), archived: fc.boolean() }, { requiredKeys: [] }),
        fc.boolean(),
        async (version, patch, asDelete) => {
          const res = asDelete ? await client.delete(`/projects/${p.id}`, `"${version}"`) : await client.patch(`/projects/${p.id}`, patch, `"${version}"`);
          expect(res.status).toBe(409);
          expect(res.etag).toBe(`"${before.version}"`);
          expect((await client.get<Project>(`/projects/${p.id}`)).body).toEqual(before);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('lets exactly one of concurrent patches with the same version win', async () => {
    const { body: p } = await newProject();
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => client.patch<Project>(`/projects/${p.id}`, { name: `n${i}` }, '"1"')));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409)).toHaveLength(9);
    expect((await client.get<Project>(`/projects/${p.id}`)).body.version).toBe(2);
  });

  it('archives on DELETE; purge deletes only a project that never had a key', async () => {
    const { body: p } = await newProject();
    const archived = await client.delete<Project>(`/projects/${p.id}`, '"1"');
    expect(archived.status).toBe(200);
    expect(archived.body).toMatchObject({ archived: true, version: 2 });
    const purged = await client.delete(`/projects/${p.id}?purge=true`, '"2"');
    expect(purged.status).toBe(200);
    expect(purged.body).toEqual({ id: p.id, object: 'project', deleted: true });
    expect((await client.get(`/projects/${p.id}`)).status).toBe(404);

    const withKey = await client.delete(`/projects/${tenant.projectId}?purge=true`, `"${(await client.get<Project>(`/projects/${tenant.projectId}`)).body.version}"`);
    expect([withKey.status, withKey.body.error?.code]).toEqual([409, 'project_has_usage']);
  });

  it("refuses the archived project's keys with 403 project_archived, and serves them again when restored", async () => {
    const other = await createTenant(database.db);
    const owner = manageClient(api.url, other.token);
    const models = () =>
      fetch(`${api.url}/v1/models`, { headers: { authorization: `Bearer ${other.key.secret}`, 'x-forwarded-for': randomClientAddress() } });
    expect((await models()).status).toBe(200);
    const archived = await owner.patch<Project>(`/projects/${other.projectId}`, { archived: true }, '"1"');
    expect(archived.status).toBe(200);
    await new Promise((r) => setTimeout(r, 200));
    const refused = await models();
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('project_archived');
    await owner.patch(`/projects/${other.projectId}`, { archived: false }, '"2"');
    await new Promise((r) => setTimeout(r, 200));
    expect((await models()).status).toBe(200);
  });

  it('enforces field bounds and refuses unknown fields with 400 naming the field', async () => {
    const long = await client.post('/projects', { name: 'x'.repeat(81) });
    expect(long.status).toBe(400);
    expect(long.body.error?.type).toBe('invalid_request_error');
    expect(long.body.error?.message).toMatch(/name/);
    const unknown = await client.post('/projects', { name: 'ok', colour: 'blue' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error?.message).toMatch(/colour/);
    const badLimit = await client.post('/projects', { name: 'ok', spend_limit: { monthly: 10, behavior: 'explode' } });
    expect(badLimit.status).toBe(400);
    expect(badLimit.body.error?.message).toMatch(/spend_limit\.behavior/);
  });

  it("answers another organization's project with 404 resource_not_found", async () => {
    const other = await createTenant(database.db);
    for (const res of [
      await client.get(`/projects/${other.projectId}`),
      await client.patch(`/projects/${other.projectId}`, { name: 'mine' }, '"1"'),
      await client.delete(`/projects/${other.projectId}`, '"1"'),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body.error).toEqual({ message: expect.any(String), type: 'not_found', code: 'resource_not_found' });
    }
    const list = await client.get<{ data: Project[] }>('/projects');
    expect(list.body.data.map((p) => p.id)).not.toContain(other.projectId);
  });

  it('refuses without the scope (403 insufficient_scope) and a viewer-created token on writes (403 insufficient_role)', async () => {
    const reader = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'r', scopes: ['*:read'], createdByMemberId: tenant.memberId });
    const readOnly = manageClient(api.url, reader.token);
    expect((await readOnly.get('/projects')).status).toBe(200);
    const refused = await readOnly.post('/projects', { name: 'nope' });
    expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_scope']);

    const viewer = await addMember(database.db, tenant.orgId, `viewer-${Date.now()}@example.com`, 'viewer');
    const viewerToken = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'v', scopes: ['*'], createdByMemberId: viewer });
    const byViewer = await manageClient(api.url, viewerToken.token).post('/projects', { name: 'nope' });
    expect([byViewer.status, byViewer.body.error?.code]).toEqual([403, 'insufficient_role']);
  });

  it('appends an audit event for every write, with actor and versions', async () => {
    const { body: p } = await newProject('audited');
    await client.patch(`/projects/${p.id}`, { name: 'audited 2' }, '"1"');
    await client.delete(`/projects/${p.id}`, '"2"');
    const rows = await database.db.select().from(auditEvents).where(and(eq(auditEvents.orgId, tenant.orgId), eq(auditEvents.resourceId, p.id)));
    expect(rows.map((r) => [r.action, r.beforeVersion, r.afterVersion, r.actorMemberId]).sort()).toEqual(
      [
        ['projects.create', null, 1, tenant.memberId],
        ['projects.delete', 2, 3, tenant.memberId],
        ['projects.update', 1, 2, tenant.memberId],
      ].sort(),
    );
  });

  it('answers an unknown resource type with 400 unknown_resource_type', async () => {
    const res = await client.get('/spaceships');
    expect([res.status, res.body.error?.code]).toEqual([400, 'unknown_resource_type']);
  });

  describe('Idempotency-Key on POST', () => {
    // A tenant of its own: the burst below would otherwise spend the shared token's 120/minute.
    let client: ReturnType<typeof manageClient>;
    beforeAll(async () => {
      client = manageClient(api.url, (await createTenant(database.db)).token);
    });

    it('replays the first answer for the same key and body', async () => {
      const key = `idem-${Date.now()}`;
      const first = await client.post<Project>('/projects', { name: 'once' }, { 'idempotency-key': key });
      const again = await client.post<Project>('/projects', { name: 'once' }, { 'idempotency-key': key });
      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
    });

    it('refuses the same key with another body (400 idempotency_key_reuse)', async () => {
      const key = `idem-reuse-${Date.now()}`;
      await client.post('/projects', { name: 'one' }, { 'idempotency-key': key });
      const reuse = await client.post('/projects', { name: 'two' }, { 'idempotency-key': key });
      expect([reuse.status, reuse.body.error?.type, reuse.body.error?.code]).toEqual([400, 'invalid_request_error', 'idempotency_key_reuse']);
    });

    it('creates exactly one resource for 50 concurrent POSTs with one key', async () => {
      const key = `idem-burst-${Date.now()}`;
      const name = `burst ${key}`;
      const answers = await Promise.all(Array.from({ length: 50 }, () => client.post<Project>('/projects', { name }, { 'idempotency-key': key })));
      for (const a of answers) expect([201, 400]).toContain(a.status);
      const refused = answers.filter((a) => a.status === 400);
      for (const a of refused) expect(a.body.error?.code).toBe('idempotency_key_in_progress');
      const ids = new Set(answers.filter((a) => a.status === 201).map((a) => a.body.id));
      expect(ids.size).toBe(1);
      const list = await client.get<{ data: Project[] }>('/projects');
      expect(list.body.data.filter((p) => p.name === name)).toHaveLength(1);
    });

    it('scopes keys to the organization', async () => {
      const key = `idem-org-${Date.now()}`;
      const other = await createTenant(database.db);
      const a = await client.post<Project>('/projects', { name: 'same' }, { 'idempotency-key': key });
      const b = await manageClient(api.url, other.token).post<Project>('/projects', { name: 'same' }, { 'idempotency-key': key });
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.body.id).not.toBe(a.body.id);
    });

    it('refuses a key longer than 255 characters', async () => {
      const res = await client.post('/projects', { name: 'x' }, { 'idempotency-key': 'k'.repeat(256) });
      expect(res.status).toBe(400);
    });
  });

  it('limits a token to 120 requests a minute (429 with Retry-After)', async () => {
    const t = await createTenant(database.db);
    const limited = manageClient(api.url, t.token);
    const statuses: number[] = [];
    for (let i = 0; i < 122; i++) statuses.push((await limited.get('/projects')).status);
    expect(statuses.slice(0, 120).every((s) => s === 200)).toBe(true);
    const last = await limited.get('/projects');
    expect(last.status).toBe(429);
    expect(last.body.error?.type).toBe('rate_limit_exceeded');
    expect(Number(last.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
