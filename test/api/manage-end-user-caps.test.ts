import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { overrideListSchema, overrideSchema } from '../../api/manage/end-user-cap-overrides';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents } from '../../core/db/schema';
import { createProject } from '../../core/tenancy/gateway-keys';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import type { TestApi } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { expectShape } from '../helpers/resource-shapes';
import { createTenant, type Tenant } from '../helpers/tenants';

type Rule = { id: string; object: string; version: number; project_id: string | null; amount: string | null; [field: string]: unknown };
type Override = z.infer<typeof overrideSchema>;

/**
 * Issue 10, section 2: end-customer cap rules through the resource framework (one per
 * organization, one per project) and the overrides under them, with the `end_users:write` scope
 * that reaches overrides and nothing else.
 */
describe('end-customer cap rules and overrides (/manage/v1)', () => {
  let fixture: ManagementFixture;
  let api: TestApi;
  let database: DatabaseHandle;
  let tenant: Tenant;
  let client: ReturnType<typeof manageClient>;
  let projectCount = 0;

  let token: string;

  beforeAll(async () => {
    fixture = await startManagementFixture();
    ({ api, database, tenant } = fixture);
  });
  afterAll(() => fixture.close());

  // A token of its own for each test: one token may make 120 requests a minute.
  beforeEach(async () => {
    token = (await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'owner', scopes: ['*'], createdByMemberId: tenant.memberId })).token;
    client = manageClient(api.url, token);
  });

  const newProject = (orgId = tenant.orgId) => createProject(database.db, { orgId, name: `caps project ${projectCount++}` });

  async function tokenWith(scopes: string[], options: { projectIds?: string[] } = {}) {
    const issued = await issueManagementToken(database.db, { orgId: tenant.orgId, name: scopes.join(' '), scopes, createdByMemberId: tenant.memberId, projectIds: options.projectIds });
    return manageClient(api.url, issued.token);
  }

  async function projectRule(body: Record<string, unknown> = {}): Promise<Rule> {
    const res = await client.post<Rule>('/end_user_cap_rules', { project_id: await newProject(), amount: '10', period: 'daily', ...body });
    expect(res.status).toBe(201);
    return res.body;
  }

  // The shared client has no PUT; overrides are written through this small helper.
  async function rawPut(explicit: string | undefined, path: string, body: unknown, ifMatch?: string) {
    const res = await fetch(`${api.url}/manage/v1${path}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${explicit ?? token}`, 'content-type': 'application/json', ...(ifMatch ? { 'if-match': ifMatch } : {}) },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Override & { error?: { code: string | null; type: string; message: string } }, etag: res.headers.get('etag') };
  }

  const auditOf = (resourceId: string) =>
    database.db.select().from(auditEvents).where(and(eq(auditEvents.orgId, tenant.orgId), eq(auditEvents.resourceId, resourceId))).orderBy(auditEvents.createdAt, auditEvents.id);

  describe('rules', () => {
    it('creates the organization rule with defaults, reads, lists, patches with If-Match and deletes it, audited', async () => {
      const created = await client.post<Rule>('/end_user_cap_rules', { amount: '25.50', period: 'monthly' });
      expect([created.status, created.etag]).toEqual([201, '"1"']);
      expect(created.body).toMatchObject({
        object: 'end_user_cap_rule', project_id: null, amount: '25.5', period: 'monthly', behavior: 'block', missing_id: 'serve', enabled: true, version: 1, managed_by: 'api',
      });
      expectShape('end_user_cap_rules', created.body);
      const id = created.body.id;

      const read = await client.get<Rule>(`/end_user_cap_rules/${id}`);
      expect([read.status, read.etag]).toEqual([200, '"1"']);
      expect(read.body).toEqual(created.body);
      const list = await client.get<{ object: string; data: Rule[]; has_more: boolean }>('/end_user_cap_rules');
      expect(list.body).toMatchObject({ object: 'list', has_more: false });
      expect(list.body.data.find((r) => r.id === id)).toEqual(created.body);

      const missing = await client.patch(`/end_user_cap_rules/${id}`, { amount: null });
      expect([missing.status, missing.body.error?.code]).toEqual([400, 'if_match_required']);
      const stale = await client.patch(`/end_user_cap_rules/${id}`, { amount: null }, '"5"');
      expect([stale.status, stale.body.error?.code, stale.etag]).toEqual([409, 'version_conflict', '"1"']);
      const patched = await client.patch<Rule>(`/end_user_cap_rules/${id}`, { amount: null, behavior: 'alert', missing_id: 'refuse', period: 'weekly', enabled: false }, '"1"');
      expect([patched.status, patched.etag]).toEqual([200, '"2"']);
      expect(patched.body).toMatchObject({ amount: null, behavior: 'alert', missing_id: 'refuse', period: 'weekly', enabled: false, version: 2 });
      expectShape('end_user_cap_rules', patched.body);
      const projectMove = await client.patch(`/end_user_cap_rules/${id}`, { project_id: tenant.projectId }, '"2"');
      expect([projectMove.status, projectMove.body.error?.message]).toEqual([400, expect.stringContaining('project_id')]);

      const deleted = await client.delete(`/end_user_cap_rules/${id}`, '"2"');
      expect([deleted.status, deleted.body]).toEqual([200, { id, object: 'end_user_cap_rule', deleted: true }]);
      expect((await client.get(`/end_user_cap_rules/${id}`)).status).toBe(404);
      expect((await auditOf(id)).map((a) => [a.action, a.beforeVersion, a.afterVersion])).toEqual([
        ['end_user_cap_rules.create', null, 1],
        ['end_user_cap_rules.update', 1, 2],
        ['end_user_cap_rules.delete', 2, null],
      ]);
    });

    it('allows one rule per organization and one per project: a second is a 400 naming project_id', async () => {
      const other = await createTenant(database.db);
      const otherClient = manageClient(api.url, other.token);
      expect((await otherClient.post('/end_user_cap_rules', { period: 'daily' })).status).toBe(201);
      const second = await otherClient.post('/end_user_cap_rules', { project_id: null, amount: '1', period: 'weekly' });
      expect([second.status, second.body.error?.type, second.body.error?.code]).toEqual([400, 'invalid_request_error', null]);
      expect(second.body.error?.message).toContain('`project_id`');
      expect(second.body.error?.message).toContain('organization already has');

      const rule = await projectRule();
      const again = await client.post('/end_user_cap_rules', { project_id: rule.project_id, period: 'monthly' });
      expect([again.status, again.body.error?.message]).toEqual([400, expect.stringContaining('this project already has')]);
      // Another project, and the organization rule beside project rules, are fine.
      await projectRule();
      expect((await client.post('/end_user_cap_rules', { period: 'daily' })).status).toBe(201);
      // Deleting a project's rule frees its place.
      expect((await client.delete(`/end_user_cap_rules/${rule.id}`, '"1"')).status).toBe(200);
      expect((await client.post('/end_user_cap_rules', { project_id: rule.project_id, period: 'monthly' })).status).toBe(201);
    });

    it('refuses bad amounts, unknown projects, unknown fields and a missing period with a 400 naming the field', async () => {
      const project = await newProject();
      const refusals: [Record<string, unknown>, string][] = [
        [{ project_id: project, period: 'daily', amount: 5 }, 'amount'],
        [{ project_id: project, period: 'daily', amount: 'five' }, 'amount'],
        [{ project_id: project, period: 'daily', amount: '-1' }, 'amount'],
        [{ project_id: project, period: 'daily', amount: '1.0000000001' }, 'amount'],
        [{ project_id: project, period: 'daily', amount: '1000000000.000000001' }, 'amount'],
        [{ project_id: project, period: 'yearly' }, 'period'],
        [{ project_id: project }, 'period'],
        [{ project_id: project, period: 'daily', behavior: 'warn' }, 'behavior'],
        [{ project_id: project, period: 'daily', missing_id: 'ignore' }, 'missing_id'],
        [{ project_id: 'proj_nope', period: 'daily' }, 'project_id'],
        [{ project_id: project, period: 'daily', surprise: true }, 'surprise'],
      ];
      for (const [body, field] of refusals) {
        const res = await client.post('/end_user_cap_rules', body);
        expect([res.status, res.body.error?.type]).toEqual([400, 'invalid_request_error']);
        expect(res.body.error?.message).toContain(field);
      }
      const other = await createTenant(database.db);
      const foreign = await client.post('/end_user_cap_rules', { project_id: other.projectId, period: 'daily' });
      expect([foreign.status, foreign.body.error?.message]).toEqual([400, expect.stringContaining('project_id')]);

      const exact = await client.post<Rule>('/end_user_cap_rules', { project_id: project, period: 'daily', amount: '0001000000000.000000000' });
      expect([exact.status, exact.body.amount]).toEqual([201, '1000000000']);
      const tiny = await client.patch<Rule>(`/end_user_cap_rules/${exact.body.id}`, { amount: '0.000000001' }, '"1"');
      expect(tiny.body.amount).toBe('0.000000001');
    });

    it('answers 404 to another organization and keeps a restricted token to its own projects', async () => {
      const rule = await projectRule();
      expect((await rawPut(undefined, `/end_user_cap_rules/${rule.id}/overrides/u1`, { amount: '1' })).status).toBe(201);
      const strangerToken = (await createTenant(database.db)).token;
      const stranger = manageClient(api.url, strangerToken);
      for (const res of [
        await stranger.get(`/end_user_cap_rules/${rule.id}`),
        await stranger.patch(`/end_user_cap_rules/${rule.id}`, { amount: '1' }, '"1"'),
        await stranger.delete(`/end_user_cap_rules/${rule.id}`, '"1"'),
        await stranger.get(`/end_user_cap_rules/${rule.id}/overrides`),
        await stranger.get(`/end_user_cap_rules/${rule.id}/overrides/u1`),
        await stranger.delete(`/end_user_cap_rules/${rule.id}/overrides/u1`),
        await rawPut(strangerToken, `/end_user_cap_rules/${rule.id}/overrides/u1`, { amount: '99' }),
      ]) expect([res.status, res.body.error?.code]).toEqual([404, 'resource_not_found']);
      expect((await client.get<Override>(`/end_user_cap_rules/${rule.id}/overrides/u1`)).body).toMatchObject({ amount: '1', version: 1 });

      const orgRule = await client.get<{ data: Rule[] }>('/end_user_cap_rules').then((r) => r.body.data.find((x) => x.project_id === null))
        ?? (await client.post<Rule>('/end_user_cap_rules', { period: 'daily' })).body;

      const inside = await newProject();
      const restrictedToken = (await issueManagementToken(database.db, {
        orgId: tenant.orgId, name: 'restricted', scopes: ['budgets:read', 'budgets:write', 'end_users:write', 'end_users:read'], createdByMemberId: tenant.memberId, projectIds: [inside],
      })).token;
      const restricted = manageClient(api.url, restrictedToken);
      expect((await restricted.post('/end_user_cap_rules', { project_id: inside, period: 'daily' })).status).toBe(201);
      const outside = await restricted.post('/end_user_cap_rules', { project_id: await newProject(), period: 'daily' });
      expect([outside.status, outside.body.error?.code]).toEqual([403, 'project_restricted']);
      const orgWide = await restricted.post('/end_user_cap_rules', { period: 'daily' });
      expect([orgWide.status, orgWide.body.error?.code]).toEqual([403, 'project_restricted']);
      expect((await restricted.get(`/end_user_cap_rules/${rule.id}`)).status).toBe(404);
      const patchOrg = await restricted.patch(`/end_user_cap_rules/${orgRule.id}`, { amount: '1' }, `"${orgRule.version}"`);
      expect([patchOrg.status, patchOrg.body.error?.code]).toEqual([403, 'project_restricted']);
      const orgOverride = await rawPut(restrictedToken, `/end_user_cap_rules/${orgRule.id}/overrides/u2`, { amount: '1' });
      expect([orgOverride.status, orgOverride.body.error?.code]).toEqual([403, 'project_restricted']);
      // Reading the organization's rule and its overrides is allowed.
      expect((await restricted.get(`/end_user_cap_rules/${orgRule.id}`)).status).toBe(200);
      expect((await restricted.get(`/end_user_cap_rules/${orgRule.id}/overrides`)).status).toBe(200);
    });
  });

  describe('overrides', () => {
    it('PUT creates (201), repeats idempotently, replaces, honours an optional If-Match, and audits each change', async () => {
      const rule = await projectRule();
      const path = `/end_user_cap_rules/${rule.id}/overrides/customer-42`;

      const created = await rawPut(undefined, path, { amount: '2.50' });
      expect([created.status, created.etag]).toEqual([201, '"1"']);
      expect(created.body).toEqual({ object: 'end_user_cap_override', rule_id: rule.id, end_user_id: 'customer-42', amount: '2.5', version: 1, created_at: expect.any(Number), updated_at: expect.any(Number) });
      overrideSchema.strict().parse(created.body);

      const repeated = await rawPut(undefined, path, { amount: '2.5' });
      expect([repeated.status, repeated.etag, repeated.body]).toEqual([200, '"1"', created.body]);

      const replaced = await rawPut(undefined, path, { amount: '7' });
      expect([replaced.status, replaced.etag, replaced.body.amount, replaced.body.version]).toEqual([200, '"2"', '7', 2]);

      const stale = await rawPut(undefined, path, { amount: '9' }, '"1"');
      expect([stale.status, stale.body.error?.type, stale.body.error?.code, stale.etag]).toEqual([409, 'conflict', 'version_conflict', '"2"']);
      expect((await client.get<Override>(path)).body.amount).toBe('7');
      const matched = await rawPut(undefined, path, { amount: '9' }, '"2"');
      expect([matched.status, matched.etag, matched.body.amount]).toEqual([200, '"3"', '9']);

      const read = await client.get<Override>(path);
      expect([read.status, read.etag]).toEqual([200, '"3"']);
      expect(read.body).toEqual(matched.body);

      const badIfMatch = await rawPut(undefined, path, { amount: '9' }, 'three');
      expect([badIfMatch.status, badIfMatch.body.error?.code]).toEqual([400, 'invalid_if_match']);
      for (const body of [{ amount: 9 }, { amount: 'nine' }, { amount: null }, {}, { amount: '1', note: 'x' }]) {
        const res = await rawPut(undefined, path, body);
        expect([res.status, res.body.error?.type]).toEqual([400, 'invalid_request_error']);
      }

      expect((await auditOf(`${rule.id}/customer-42`)).map((a) => [a.action, a.beforeVersion, a.afterVersion, a.detail])).toEqual([
        ['end_user_cap_overrides.create', null, 1, { rule_id: rule.id, end_user_id: 'customer-42', amount: '2.5' }],
        ['end_user_cap_overrides.update', 1, 2, { rule_id: rule.id, end_user_id: 'customer-42', amount: '7' }],
        ['end_user_cap_overrides.update', 2, 3, { rule_id: rule.id, end_user_id: 'customer-42', amount: '9' }],
      ]);
    });

    it('concurrent PUTs: one creates, the rest replace; with one If-Match exactly one wins', async () => {
      const rule = await projectRule();
      const path = `/end_user_cap_rules/${rule.id}/overrides/racer`;
      const amounts = ['1', '2', '3', '4', '5', '6'];
      const puts = await Promise.all(amounts.map((amount) => rawPut(undefined, path, { amount })));
      expect(puts.filter((p) => p.status === 201)).toHaveLength(1);
      expect(puts.every((p) => p.status === 201 || p.status === 200)).toBe(true);
      const after = await client.get<Override>(path);
      expect(amounts).toContain(after.body.amount);
      expect(after.body.version).toBe(amounts.length);

      const guarded = await Promise.all(['7', '8', '9', '10'].map((amount) => rawPut(undefined, path, { amount }, `"${after.body.version}"`)));
      expect(guarded.map((p) => p.status).sort()).toEqual([200, 409, 409, 409]);
      expect((await client.get<Override>(path)).body.version).toBe(amounts.length + 1);
    });

    it('DELETE removes with an optional If-Match; missing overrides and a stale If-Match on a missing one are refused', async () => {
      const rule = await projectRule();
      const path = `/end_user_cap_rules/${rule.id}/overrides/bye`;
      const absent = await client.get(path);
      expect([absent.status, absent.body.error?.code]).toEqual([404, 'resource_not_found']);
      const createWithIfMatch = await rawPut(undefined, path, { amount: '1' }, '"1"');
      expect([createWithIfMatch.status, createWithIfMatch.body.error?.code]).toEqual([409, 'version_conflict']);
      expect((await rawPut(undefined, path, { amount: '1' })).status).toBe(201);

      const stale = await client.delete(path, '"4"');
      expect([stale.status, stale.body.error?.code, stale.etag]).toEqual([409, 'version_conflict', '"1"']);
      const deleted = await client.delete(path, '"1"');
      expect([deleted.status, deleted.body]).toEqual([200, { object: 'end_user_cap_override', rule_id: rule.id, end_user_id: 'bye', deleted: true }]);
      expect((await client.get(path)).status).toBe(404);
      const again = await client.delete(path);
      expect([again.status, again.body.error?.code]).toEqual([404, 'resource_not_found']);

      expect((await rawPut(undefined, path, { amount: '3' })).status).toBe(201);
      expect((await client.delete(path)).status).toBe(200);
      expect((await auditOf(`${rule.id}/bye`)).map((a) => a.action)).toEqual([
        'end_user_cap_overrides.create', 'end_user_cap_overrides.delete', 'end_user_cap_overrides.create', 'end_user_cap_overrides.delete',
      ]);
    });

    it('addresses customers by their own ids, URL-encoded, up to 256 characters', async () => {
      const rule = await projectRule();
      for (const id of ['alice@example.com', 'team/a b?c#d', 'ü-🙂', 'x'.repeat(256)]) {
        const path = `/end_user_cap_rules/${rule.id}/overrides/${encodeURIComponent(id)}`;
        const res = await rawPut(undefined, path, { amount: '1' });
        expect([res.status, res.body.end_user_id]).toEqual([201, id]);
        expect((await client.get<Override>(path)).body.end_user_id).toBe(id);
      }
      const tooLong = await rawPut(undefined, `/end_user_cap_rules/${rule.id}/overrides/${'y'.repeat(257)}`, { amount: '1' });
      expect([tooLong.status, tooLong.body.error?.message]).toEqual([400, expect.stringContaining('end_user_id')]);
      const unknownRule = await rawPut(undefined, '/end_user_cap_rules/eucap_nope/overrides/u', { amount: '1' });
      expect([unknownRule.status, unknownRule.body.error?.code]).toEqual([404, 'resource_not_found']);
    });

    it('lists a rule\'s overrides by end_user_id in pages: limit (1 to 100, default 20), starting_after, has_more', async () => {
      const rule = await projectRule();
      const ids = Array.from({ length: 23 }, (_, i) => `user-${String(i).padStart(2, '0')}`);
      for (const id of [...ids].reverse()) expect((await rawPut(undefined, `/end_user_cap_rules/${rule.id}/overrides/${id}`, { amount: '1' })).status).toBe(201);
      // Another rule's overrides stay out.
      const other = await projectRule();
      await rawPut(undefined, `/end_user_cap_rules/${other.id}/overrides/user-00`, { amount: '1' });

      type Page = z.infer<typeof overrideListSchema>;
      const first = await client.get<Page>(`/end_user_cap_rules/${rule.id}/overrides`);
      overrideListSchema.parse(first.body);
      expect(first.body.data.map((o) => o.end_user_id)).toEqual(ids.slice(0, 20));
      expect(first.body).toMatchObject({ object: 'list', has_more: true });

      const seen: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await client.get<Page>(`/end_user_cap_rules/${rule.id}/overrides?limit=10${after ? `&starting_after=${after}` : ''}`);
        expect(page.status).toBe(200);
        seen.push(...page.body.data.map((o) => o.end_user_id));
        if (!page.body.has_more) break;
        after = page.body.data.at(-1)!.end_user_id;
      }
      expect(seen).toEqual(ids);
      const exact = await client.get<Page>(`/end_user_cap_rules/${rule.id}/overrides?limit=3&starting_after=user-19`);
      expect([exact.body.data.map((o) => o.end_user_id), exact.body.has_more]).toEqual([['user-20', 'user-21', 'user-22'], false]);

      for (const bad of ['limit=0', 'limit=101', 'limit=two', 'limit=2.5']) {
        const res = await client.get(`/end_user_cap_rules/${rule.id}/overrides?${bad}`);
        expect([res.status, res.body.error?.message]).toEqual([400, expect.stringContaining('limit')]);
      }
      expect((await client.get<Page>(`/end_user_cap_rules/${rule.id}/overrides?limit=100`)).body.data).toHaveLength(23);
    });

    it('go with their rule when it is deleted', async () => {
      const rule = await projectRule();
      await rawPut(undefined, `/end_user_cap_rules/${rule.id}/overrides/gone`, { amount: '1' });
      expect((await client.delete(`/end_user_cap_rules/${rule.id}`, '"1"')).status).toBe(200);
      expect((await client.get(`/end_user_cap_rules/${rule.id}/overrides/gone`)).status).toBe(404);
      expect((await rawPut(undefined, `/end_user_cap_rules/${rule.id}/overrides/gone`, { amount: '1' })).status).toBe(404);
    });
  });

  describe('scopes', () => {
    it('a token holding only end_users:write does exactly the override operations', async () => {
      const rule = await projectRule();
      const issued = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'overrides only', scopes: ['end_users:write'], createdByMemberId: tenant.memberId });
      const only = manageClient(api.url, issued.token);
      const path = `/end_user_cap_rules/${rule.id}/overrides/scoped-user`;

      expect((await rawPut(issued.token, path, { amount: '4' })).status).toBe(201);
      expect((await only.get(path)).status).toBe(200);
      expect((await only.get(`/end_user_cap_rules/${rule.id}/overrides`)).status).toBe(200);
      expect((await only.delete(path)).status).toBe(200);

      const elsewhere = [
        await only.get('/end_user_cap_rules'),
        await only.get(`/end_user_cap_rules/${rule.id}`),
        await only.post('/end_user_cap_rules', { project_id: await newProject(), period: 'daily' }),
        await only.patch(`/end_user_cap_rules/${rule.id}`, { amount: '100' }, '"1"'),
        await only.delete(`/end_user_cap_rules/${rule.id}`, '"1"'),
        await only.get('/projects'),
        await only.get('/gateway_keys'),
        await only.get('/member_budgets'),
        await only.patch('/org_settings', { billing_day_of_month: 3 }, '"1"'),
        await only.get('/organization'),
      ];
      for (const res of elsewhere) expect([res.status, res.body.error?.type, res.body.error?.code]).toEqual([403, 'permission_denied', 'insufficient_scope']);
      expect((await client.get<Rule>(`/end_user_cap_rules/${rule.id}`)).body).toMatchObject({ version: 1, amount: '10' });
    });

    it('reads need end_users:read (or *:read), writes end_users:write; rules need budgets scopes', async () => {
      const rule = await projectRule();
      const path = `/end_user_cap_rules/${rule.id}/overrides/reader-check`;
      expect((await rawPut(undefined, path, { amount: '1' })).status).toBe(201);

      const readAll = await tokenWith(['*:read']);
      expect((await readAll.get(path)).status).toBe(200);
      expect((await readAll.get(`/end_user_cap_rules/${rule.id}/overrides`)).status).toBe(200);
      expect((await readAll.get(`/end_user_cap_rules/${rule.id}`)).status).toBe(200);
      const refused = await readAll.delete(path);
      expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_scope']);

      const budgets = await tokenWith(['budgets:read', 'budgets:write']);
      expect((await budgets.get(`/end_user_cap_rules/${rule.id}`)).status).toBe(200);
      for (const res of [await budgets.get(path), await budgets.delete(path)]) {
        expect([res.status, res.body.error?.code]).toEqual([403, 'insufficient_scope']);
      }
      const issued = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'budgets', scopes: ['budgets:write'], createdByMemberId: tenant.memberId });
      const budgetPut = await rawPut(issued.token, path, { amount: '2' });
      expect([budgetPut.status, budgetPut.body.error?.code]).toEqual([403, 'insufficient_scope']);

      const none = await tokenWith(['organization:read']);
      for (const res of [await none.get('/end_user_cap_rules'), await none.get(path), await none.get(`/end_user_cap_rules/${rule.id}/overrides`)]) {
        expect([res.status, res.body.error?.code]).toEqual([403, 'insufficient_scope']);
      }
    });
  });
});
