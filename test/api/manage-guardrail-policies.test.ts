import { and, eq } from 'drizzle-orm';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents } from '../../core/db/schema';
import { createProject, issueGatewayKey } from '../../core/tenancy/gateway-keys';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import type { TestApi } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { expectShape } from '../helpers/resource-shapes';
import type { Tenant } from '../helpers/tenants';

type Policy = { id: string; version: number; target: string; enabled: boolean; on_engine_error: string; rules: Array<Record<string, unknown>> };

/**
 * Issue 12, section 2: `guardrail_policies` through the resource framework. A policy has no row
 * of its own: it lives on the organization's settings, a project or a key, and its version is
 * that parent's.
 */
describe('guardrail policies (/manage/v1)', () => {
  let fixture: ManagementFixture;
  let api: TestApi;
  let database: DatabaseHandle;
  let tenant: Tenant;
  let client: ReturnType<typeof manageClient>;
  let n = 0;

  beforeAll(async () => {
    fixture = await startManagementFixture();
    ({ api, database, tenant } = fixture);
  });
  afterAll(() => fixture.close());

  // A token of its own for each test: one token may make 120 requests a minute.
  beforeEach(async () => {
    client = manageClient(api.url, (await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'owner', scopes: ['*'], createdByMemberId: tenant.memberId })).token);
  });

  const email = { detector: 'email', stage: 'input', action: 'redact' };
  const newProject = () => createProject(database.db, { orgId: tenant.orgId, name: `guarded ${n++}` });

  it('create, read, list, patch (merged), delete: the version is the parent project\'s', async () => {
    const projectId = await newProject();
    const id = `project:${projectId}`;
    const before = await client.get(`/projects/${projectId}`);

    const created = await client.post<Policy>('/guardrail_policies', { target: id, rules: [email] });
    expect(created.status).toBe(201);
    expectShape('guardrail_policies', created.body);
    expect(created.body).toMatchObject({ id, object: 'guardrail_policy', target: id, enabled: true, on_engine_error: 'block', rules: [email], version: (before.body.version as number) + 1 });
    expect(created.etag).toBe(`"${created.body.version}"`);

    const project = await client.get(`/projects/${projectId}`);
    expect(project.body.version).toBe(created.body.version);
    const read = await client.get<Policy>(`/guardrail_policies/${id}`);
    expect([read.status, read.etag, read.body]).toEqual([200, created.etag, created.body]);
    expect((await client.get<{ data: Policy[] }>('/guardrail_policies')).body.data.map((p) => p.id)).toContain(id);

    // A patch merges: only `on_engine_error` changes, the rules stay.
    const patched = await client.patch<Policy>(`/guardrail_policies/${id}`, { on_engine_error: 'allow' }, created.etag!);
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ on_engine_error: 'allow', enabled: true, rules: [email], version: created.body.version + 1 });
    const rules = [{ detector: 'keywords', stage: 'both', action: 'flag', words: ['falcon'] }];
    const replaced = await client.patch<Policy>(`/guardrail_policies/${id}`, { rules }, patched.etag!);
    expect(replaced.body).toMatchObject({ on_engine_error: 'allow', rules });

    // Changing the project moves the policy's version too.
    const renamed = await client.patch(`/projects/${projectId}`, { name: 'renamed' }, replaced.etag!);
    expect(renamed.status).toBe(200);
    const moved = await client.get<Policy>(`/guardrail_policies/${id}`);
    expect([moved.body.version, moved.etag]).toEqual([replaced.body.version + 1, renamed.etag]);
    const stale = await client.patch(`/guardrail_policies/${id}`, { enabled: false }, replaced.etag!);
    expect([stale.status, stale.body.error?.code]).toEqual([409, 'version_conflict']);

    const deleted = await client.delete(`/guardrail_policies/${id}`, moved.etag!);
    expect([deleted.status, deleted.body]).toEqual([200, { id, object: 'guardrail_policy', deleted: true }]);
    expect((await client.get(`/guardrail_policies/${id}`)).status).toBe(404);
    const after = await client.get(`/projects/${projectId}`);
    expect([after.status, after.body.version, after.body.name]).toEqual([200, moved.body.version + 1, 'renamed']);

    const audited = await database.db.select({ action: auditEvents.action }).from(auditEvents)
      .where(and(eq(auditEvents.orgId, tenant.orgId), eq(auditEvents.resourceId, id)));
    expect(audited.map((a) => a.action).sort()).toEqual(['guardrail_policies.create', 'guardrail_policies.delete', 'guardrail_policies.update', 'guardrail_policies.update']);
  });

  it('organization and key policies take the version of the settings and of the key', async () => {
    const settings = await client.get('/org_settings');
    const org = await client.post<Policy>('/guardrail_policies', { target: 'organization', enabled: false, on_engine_error: 'allow', rules: [] });
    expect(org.status).toBe(201);
    expect(org.body).toMatchObject({ id: 'organization', enabled: false, version: (settings.body.version as number) + 1 });
    expect((await client.get('/org_settings')).body.version).toBe(org.body.version);
    expect((await client.delete('/guardrail_policies/organization', org.etag!)).status).toBe(200);

    const key = await issueGatewayKey(database.db, { orgId: tenant.orgId, projectId: tenant.projectId, label: 'guarded key' });
    const created = await client.post<Policy>('/guardrail_policies', { target: `key:${key.id}`, rules: [email] });
    expect(created.status).toBe(201);
    const keyRead = await client.get(`/gateway_keys/${key.id}`);
    expect(keyRead.body.version).toBe(created.body.version);
    // A revoked key has no policy to read.
    expect((await client.delete(`/gateway_keys/${key.id}`, keyRead.etag!)).status).toBe(200);
    expect((await client.get(`/guardrail_policies/key:${key.id}`)).status).toBe(404);
  });

  it('400 on bad rules, unknown targets and a second policy for one parent', async () => {
    const projectId = await newProject();
    const target = `project:${projectId}`;
    const bad: Array<[unknown, RegExp]> = [
      [[{ detector: 'ssn', stage: 'input', action: 'flag' }], /rules\.0/],
      [[{ detector: 'email', stage: 'input', action: 'erase' }], /rules\.0\.action/],
      [[{ detector: 'email', stage: 'input', action: 'flag', words: ['x'] }], /rules\.0/],
      [[{ detector: 'keywords', stage: 'input', action: 'flag', words: [] }], /rules\.0\.words/],
      [[{ detector: 'regex', stage: 'input', action: 'flag', patterns: ['(a)\\1'] }], /not a valid RE2 expression/],
      [[{ detector: 'regex', stage: 'input', action: 'flag', patterns: ['(?=a)a'] }], /not a valid RE2 expression/],
      [[{ detector: 'regex', stage: 'input', action: 'flag', patterns: ['x*'] }], /matches the empty string/],
    ];
    for (const [rules, message] of bad) {
      const res = await client.post('/guardrail_policies', { target, rules });
      expect([JSON.stringify(rules), res.status, res.body.error?.type]).toEqual([JSON.stringify(rules), 400, 'invalid_request_error']);
      expect(res.body.error?.message).toMatch(message);
    }
    for (const wrong of ['project:proj_nope', 'key:key_nope', 'team:x', 'organization:x']) {
      expect([(await client.post('/guardrail_policies', { target: wrong, rules: [] })).status, wrong]).toEqual([400, wrong]);
    }
    expect((await client.post('/guardrail_policies', { target, rules: [email] })).status).toBe(201);
    const again = await client.post('/guardrail_policies', { target, rules: [email] });
    expect([again.status, again.body.error?.message]).toEqual([400, expect.stringMatching(/already has a guardrail policy/)]);
    const read = await client.get(`/guardrail_policies/${target}`);
    const badPatch = await client.patch(`/guardrail_policies/${target}`, { rules: [{ detector: 'regex', stage: 'input', action: 'flag', patterns: ['('] }] }, read.etag!);
    expect(badPatch.status).toBe(400);
    expect((await client.patch(`/guardrail_policies/${target}`, { target: 'organization' }, read.etag!)).status).toBe(400);
  });

  it('refuses patterns past the bounds at create and patch, naming the pattern (issue 52)', async () => {
    const target = `project:${await newProject()}`;
    const regex = (patterns: string[]) => ({ detector: 'regex', stage: 'both', action: 'block', case_insensitive: true, patterns });
    // The review's 496-character rule: about 98,000 RE2 instructions, 26 s to scan a 2,000-character prompt.
    const huge = `${'\\w{0,1000}'.repeat(49)}\\s\\d\\s`;
    expect(huge).toHaveLength(496);
    const created = await client.post('/guardrail_policies', { target, rules: [email, regex(['order-\\d{6}', huge])] });
    expect([created.status, created.body.error?.type, created.body.error?.message]).toEqual([400, 'invalid_request_error', expect.stringMatching(/^Invalid `rules\.1\.patterns\.1`: the pattern compiles to about \d+ RE2 instructions; at most 1000/)]);
    expect((await client.post('/guardrail_policies', { target, rules: [regex(['a{998}'])] })).status).toBe(201);
    const read = await client.get(`/guardrail_policies/${target}`);
    // Within the bound one by one, past it together.
    const total = await client.patch(`/guardrail_policies/${target}`, { rules: [regex(['a{998}']), regex(['b{998}', 'c{998}'])] }, read.etag!);
    expect([total.status, total.body.error?.message]).toEqual([400, expect.stringMatching(/^Invalid `rules\.1\.patterns\.1`: .* together; at most 2000/)]);
    const crowded = Array.from({ length: 6 }, (_, r) => regex(Array.from({ length: 20 }, (_, p) => `r${r}p${p}`)));
    const count = await client.patch(`/guardrail_policies/${target}`, { rules: crowded }, read.etag!);
    expect([count.status, count.body.error?.message]).toEqual([400, expect.stringMatching(/^Invalid `rules\.5\.patterns\.0`: the pattern is one too many: at most 100 /)]);
  });

  it('scopes and roles: reads need guardrails:read, writes guardrails:write and an admin; a project-restricted token reaches only its projects', async () => {
    const projectId = await newProject();
    const other = await newProject();
    expect((await client.post('/guardrail_policies', { target: `project:${other}`, rules: [email] })).status).toBe(201);
    const reader = manageClient(api.url, (await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'r', scopes: ['guardrails:read'], createdByMemberId: tenant.memberId })).token);
    expect((await reader.get(`/guardrail_policies/project:${other}`)).status).toBe(200);
    const refused = await reader.post('/guardrail_policies', { target: `project:${projectId}`, rules: [] });
    expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_scope']);

    const restricted = manageClient(api.url, (await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'p', scopes: ['*'], createdByMemberId: tenant.memberId, projectIds: [projectId] })).token);
    expect((await restricted.post('/guardrail_policies', { target: `project:${projectId}`, rules: [email] })).status).toBe(201);
    expect((await restricted.get(`/guardrail_policies/project:${other}`)).status).toBe(404);
    expect((await restricted.post('/guardrail_policies', { target: `project:${other}`, rules: [] })).body.error?.code).toBe('project_restricted');
    expect((await restricted.post('/guardrail_policies', { target: 'organization', rules: [] })).body.error?.code).toBe('project_restricted');
    const listed = (await restricted.get<{ data: Policy[] }>('/guardrail_policies')).body.data.map((p) => p.id);
    expect(listed).toContain(`project:${projectId}`);
    expect(listed).not.toContain(`project:${other}`);
  });
});
