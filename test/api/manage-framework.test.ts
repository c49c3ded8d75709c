import { and, eq } from 'drizzle-orm';
import fc from 'fast-check';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents, idempotencyRecords } from '../../core/db/schema';
import { withIdempotency, type FirstAnswer, type IdempotencyClaim } from '../../core/idempotency';
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

    /**
     * `withIdempotency` itself against Postgres, with the clock passed in: a request slower than
     * the 60 s lease, and failures after the request recorded what it starts.
     */
    describe('fencing and checkpoints', () => {
      const LEASE_MS = 60_000;
      let orgId: string;
      let n = 0;
      beforeAll(async () => {
        orgId = (await createTenant(database.db)).orgId;
      });
      const claimAt = (key: string, now: Date, request: unknown = { name: 'x' }) => ({ orgId, scope: 'test:fencing', key, request, now });
      const later = (t: Date, ms: number) => new Date(t.getTime() + ms);
      const newKey = () => `fence-${Date.now()}-${n++}`;
      const record = async (key: string) =>
        (await database.db.select().from(idempotencyRecords).where(and(eq(idempotencyRecords.orgId, orgId), eq(idempotencyRecords.key, key))))[0];
      function gate() {
        let open!: () => void;
        const opened = new Promise<void>((r) => (open = r));
        return { open, opened };
      }
      const code = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code ?? String(e));

      it('a first request past its lease cannot overwrite the record of the retry that took it over', async () => {
        const key = newKey();
        const t0 = new Date();
        const slow = gate();
        const first = withIdempotency(database.db, claimAt(key, t0), async () => {
          await slow.opened;
          return { status: 201, body: { id: 'first' } };
        });
        await new Promise((r) => setTimeout(r, 50));
        // Inside the lease the key is busy; past it a retry takes the record over.
        await expect(code(withIdempotency(database.db, claimAt(key, later(t0, 1_000)), async () => ({ status: 201, body: { id: 'x' } })))).resolves.toBe('idempotency_key_in_progress');
        const retry = await withIdempotency(database.db, claimAt(key, later(t0, LEASE_MS + 1_000)), async () => ({ status: 201, body: { id: 'retry' } }));
        expect(retry).toEqual({ status: 201, body: { id: 'retry' }, replayed: false });

        slow.open();
        // The slow one answers what it did, but stores nothing over the new owner's answer.
        expect(await first).toEqual({ status: 201, body: { id: 'first' }, replayed: false });
        expect(await record(key)).toMatchObject({ state: 'done', responseBody: { id: 'retry' } });
        const replay = await withIdempotency(database.db, claimAt(key, later(t0, LEASE_MS + 2_000)), async () => ({ status: 500, body: {} }));
        expect(replay).toEqual({ status: 201, body: { id: 'retry' }, replayed: true });
      });

      it('a slow first request that fails after losing its lease leaves the new owner\'s record in place', async () => {
        const key = newKey();
        const t0 = new Date();
        const slow = gate();
        const first = withIdempotency(database.db, claimAt(key, t0), async () => {
          await slow.opened;
          throw new Error('the slow one failed');
        });
        await new Promise((r) => setTimeout(r, 50));
        const busy = gate();
        const retry = withIdempotency(database.db, claimAt(key, later(t0, LEASE_MS + 1_000)), async () => {
          await busy.opened;
          return { status: 201, body: { id: 'retry' } };
        });
        await new Promise((r) => setTimeout(r, 50));
        slow.open();
        await expect(first).rejects.toThrow('the slow one failed');
        expect(await record(key)).toMatchObject({ state: 'in_progress' });
        busy.open();
        expect((await retry).body).toEqual({ id: 'retry' });
        expect(await record(key)).toMatchObject({ state: 'done', responseBody: { id: 'retry' } });
      });

      it('a slow first request cannot checkpoint once another took its key over, so it starts nothing', async () => {
        const key = newKey();
        const t0 = new Date();
        const slow = gate();
        let started = 0;
        const first = withIdempotency(database.db, claimAt(key, t0), async (claim) => {
          await slow.opened;
          await claim.checkpoint({ job_id: 'job_slow' });
          started++;
          return { status: 202, body: { id: 'job_slow' } };
        });
        await new Promise((r) => setTimeout(r, 50));
        const retry = await withIdempotency(database.db, claimAt(key, later(t0, LEASE_MS + 1_000)), async (claim) => {
          await claim.checkpoint({ job_id: 'job_retry' });
          started++;
          return { status: 202, body: { id: 'job_retry' } };
        });
        expect(retry.body).toEqual({ id: 'job_retry' });
        slow.open();
        await expect(code(first)).resolves.toBe('idempotency_key_in_progress');
        expect(started).toBe(1);
        expect(await record(key)).toMatchObject({ state: 'done', checkpoint: { job_id: 'job_retry' }, responseBody: { id: 'job_retry' } });
      });

      it('a failure after the checkpoint keeps the record; the retry resolves to the checkpoint without performing again', async () => {
        const key = newKey();
        const t0 = new Date();
        const failing = withIdempotency(
          database.db,
          claimAt(key, t0),
          async (claim) => {
            await claim.checkpoint({ job_id: 'job_once' });
            throw new Error('the row insert failed after the start');
          },
          async () => {
            throw new Error('nothing to resume on a first request');
          },
        );
        await expect(failing).rejects.toThrow('the row insert failed after the start');
        expect(await record(key)).toMatchObject({ state: 'failed', checkpoint: { job_id: 'job_once' } });

        const perform = jest.fn(async (): Promise<FirstAnswer> => ({ status: 202, body: { id: 'job_second' } }));
        const resume = jest.fn(async (cp: Record<string, unknown>): Promise<FirstAnswer> => ({ status: 202, body: { id: cp.job_id } }));
        // Another body never resumes it.
        await expect(code(withIdempotency(database.db, claimAt(key, later(t0, 1_000), { name: 'other' }), perform, resume))).resolves.toBe('idempotency_key_reuse');
        const retry = await withIdempotency(database.db, claimAt(key, later(t0, 1_000)), perform, resume);
        expect(retry).toEqual({ status: 202, body: { id: 'job_once' }, replayed: false });
        expect(perform).not.toHaveBeenCalled();
        expect(resume).toHaveBeenCalledWith({ job_id: 'job_once' });
        const replay = await withIdempotency(database.db, claimAt(key, later(t0, 2_000)), perform, resume);
        expect(replay).toEqual({ status: 202, body: { id: 'job_once' }, replayed: true });
        expect(perform).not.toHaveBeenCalled();
        expect(resume).toHaveBeenCalledTimes(1);
      });

      it('a request that died after its checkpoint resolves to it once its lease passed; a failed resume keeps it', async () => {
        const key = newKey();
        const t0 = new Date();
        const checkpointed = gate();
        // Never settles: the API process died after the checkpoint.
        void withIdempotency(database.db, claimAt(key, t0), async (claim: IdempotencyClaim) => {
          await claim.checkpoint({ job_id: 'job_died' });
          checkpointed.open();
          return new Promise<FirstAnswer>(() => undefined);
        });
        await checkpointed.opened;
        const perform = jest.fn(async (): Promise<FirstAnswer> => ({ status: 202, body: { id: 'job_second' } }));
        await expect(code(withIdempotency(database.db, claimAt(key, later(t0, 1_000)), perform))).resolves.toBe('idempotency_key_in_progress');
        const flaky = jest.fn(async (): Promise<FirstAnswer> => {
          throw new Error('temporal unavailable');
        });
        await expect(withIdempotency(database.db, claimAt(key, later(t0, LEASE_MS + 1_000)), perform, flaky)).rejects.toThrow('temporal unavailable');
        expect(await record(key)).toMatchObject({ state: 'failed', checkpoint: { job_id: 'job_died' } });
        const resume = jest.fn(async (cp: Record<string, unknown>): Promise<FirstAnswer> => ({ status: 202, body: { id: cp.job_id } }));
        const retry = await withIdempotency(database.db, claimAt(key, later(t0, LEASE_MS + 2_000)), perform, resume);
        expect(retry.body).toEqual({ id: 'job_died' });
        expect(perform).not.toHaveBeenCalled();
      });

      it('a failure before any checkpoint frees the key, and a checkpoint does not outlive the replay window', async () => {
        const key = newKey();
        const t0 = new Date();
        await expect(withIdempotency(database.db, claimAt(key, t0), async () => {
          throw new Error('refused before starting anything');
        })).rejects.toThrow('refused before starting anything');
        expect(await record(key)).toBeUndefined();
        const perform = jest.fn(async (claim: IdempotencyClaim): Promise<FirstAnswer> => {
          await claim.checkpoint({ job_id: 'job_a' });
          return { status: 202, body: { id: 'job_a' } };
        });
        expect((await withIdempotency(database.db, claimAt(key, t0), perform)).body).toEqual({ id: 'job_a' });
        // A day later the key is new again: the old checkpoint is not resumed.
        const resume = jest.fn(async (): Promise<FirstAnswer> => ({ status: 202, body: { id: 'resumed' } }));
        const fresh = jest.fn(async (): Promise<FirstAnswer> => ({ status: 202, body: { id: 'job_b' } }));
        expect((await withIdempotency(database.db, claimAt(key, later(t0, 86_400_000 + 1_000)), fresh, resume)).body).toEqual({ id: 'job_b' });
        expect(resume).not.toHaveBeenCalled();
        expect(await record(key)).toMatchObject({ state: 'done', checkpoint: null });
      });
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
