import { and, eq } from 'drizzle-orm';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { addMember } from '../../core/tenancy/organizations';
import type { TestApi } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { expectShape } from '../helpers/resource-shapes';
import { createTenant, type Tenant } from '../helpers/tenants';

type Settings = { id: string; version: number; unpriced_budget_policy: string; billing_day_of_month: number; hard_cap: unknown };
type Budget = { id: string; version: number; email: string; role: string; spend_limit: unknown };

describe('org_settings, member_budgets and model_prices', () => {
  let fixture: ManagementFixture;
  let api: TestApi;
  let database: DatabaseHandle;
  let tenant: Tenant;
  let client: ReturnType<typeof manageClient>;

  beforeAll(async () => {
    fixture = await startManagementFixture();
    ({ api, database, tenant, client } = fixture);
  });
  afterAll(() => fixture.close());

  async function tokenFor(role: 'admin' | 'member' | 'viewer', scopes = ['*']) {
    const memberId = await addMember(database.db, tenant.orgId, `${role}-${Date.now()}-${Math.random()}@example.com`, role);
    const { token } = await issueManagementToken(database.db, { orgId: tenant.orgId, name: role, scopes, createdByMemberId: memberId });
    return { memberId, client: manageClient(api.url, token) };
  }

  describe('org_settings (a single object per organization)', () => {
    it('reads defaults at /org_settings and patches with If-Match, audited', async () => {
      const read = await client.get<Settings>('/org_settings');
      expect(read.status).toBe(200);
      expect(read.body).toMatchObject({ object: 'org_settings', version: 1, unpriced_budget_policy: 'block', billing_day_of_month: 1, hard_cap: null });
      expectShape('org_settings', read.body);

      expect((await client.patch('/org_settings', { billing_day_of_month: 15 })).body.error?.code).toBe('if_match_required');
      const stale = await client.patch('/org_settings', { billing_day_of_month: 15 }, '"9"');
      expect([stale.status, stale.etag]).toEqual([409, '"1"']);
      const patched = await client.patch<Settings>('/org_settings', { billing_day_of_month: 15, hard_cap: { monthly: 1000, behavior: 'block' } }, '"1"');
      expect(patched.body).toMatchObject({ version: 2, billing_day_of_month: 15, hard_cap: { monthly: 1000, behavior: 'block' } });
      expect((await client.get<Settings>('/org_settings')).etag).toBe('"2"');
      const [audit] = await database.db.select().from(auditEvents)
        .where(and(eq(auditEvents.orgId, tenant.orgId), eq(auditEvents.resourceType, 'org_settings')));
      expect(audit).toMatchObject({ action: 'org_settings.update', beforeVersion: 1, afterVersion: 2, resourceId: tenant.orgId });
    });

    it('enforces bounds: billing_day_of_month 1 to 28', async () => {
      const current = await client.get<Settings>('/org_settings');
      for (const day of [0, 29, 1.5]) {
        const res = await client.patch('/org_settings', { billing_day_of_month: day }, current.etag!);
        expect(res.status).toBe(400);
        expect(res.body.error?.message).toContain('billing_day_of_month');
      }
    });

    it('lets only an owner loosen unpriced_budget_policy to allow; tightening needs no owner', async () => {
      const admin = await tokenFor('admin');
      let current = await client.get<Settings>('/org_settings');
      const refused = await admin.client.patch('/org_settings', { unpriced_budget_policy: 'allow' }, current.etag!);
      expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_role']);
      expect((await client.get<Settings>('/org_settings')).body.unpriced_budget_policy).toBe('block');

      const loosened = await client.patch<Settings>('/org_settings', { unpriced_budget_policy: 'allow' }, current.etag!);
      expect(loosened.body.unpriced_budget_policy).toBe('allow');
      current = await client.get<Settings>('/org_settings');
      const tightened = await admin.client.patch<Settings>('/org_settings', { unpriced_budget_policy: 'block' }, current.etag!);
      expect(tightened.body.unpriced_budget_policy).toBe('block');
    });

    it('has no create, delete or per-id path, and each organization sees its own', async () => {
      expect((await client.post('/org_settings', {})).body.error?.code).toBe('operation_not_supported');
      expect((await client.delete(`/org_settings/${tenant.orgId}`, '"1"')).body.error?.code).toBe('operation_not_supported');
      const other = await createTenant(database.db);
      const theirs = await manageClient(api.url, other.token).get<Settings>('/org_settings');
      expect(theirs.body).toMatchObject({ id: other.orgId, version: 1, billing_day_of_month: 1 });
    });

    it('needs the settings scope', async () => {
      const narrow = await tokenFor('admin', ['projects:read']);
      expect((await narrow.client.get('/org_settings')).body.error?.code).toBe('insufficient_scope');
    });
  });

  describe('member_budgets (one per member, no create or delete)', () => {
    it('lists every member, reads and patches one by member id', async () => {
      const extra = await tokenFor('member');
      const list = await client.get<{ data: Budget[] }>('/member_budgets');
      const ids = list.body.data.map((b) => b.id);
      expect(ids).toEqual(expect.arrayContaining([tenant.memberId, extra.memberId]));
      for (const b of list.body.data) expectShape('member_budgets', b);

      const read = await client.get<Budget>(`/member_budgets/${extra.memberId}`);
      expect(read.body).toMatchObject({ object: 'member_budget', role: 'member', spend_limit: null, version: 1 });
      const patched = await client.patch<Budget>(`/member_budgets/${extra.memberId}`, { spend_limit: { monthly: 50, behavior: 'block', alert_at: [0.5, 0.9] } }, '"1"');
      expect(patched.body).toMatchObject({ version: 2, role: 'member', email: read.body.email, spend_limit: { monthly: 50, behavior: 'block', alert_at: [0.5, 0.9] } });
      expectShape('member_budgets', patched.body);
      const bad = await client.patch(`/member_budgets/${extra.memberId}`, { spend_limit: { monthly: 50, behavior: 'block', alert_at: [1.5] } }, '"2"');
      expect(bad.status).toBe(400);
      expect(bad.body.error?.message).toContain('spend_limit');
      const removed = await client.patch<Budget>(`/member_budgets/${extra.memberId}`, { spend_limit: null }, '"2"');
      expect(removed.body.spend_limit).toBeNull();
      const audit = await database.db.select().from(auditEvents).where(eq(auditEvents.resourceId, extra.memberId)).orderBy(auditEvents.createdAt, auditEvents.id);
      expect(audit.map((a) => [a.action, a.beforeVersion, a.afterVersion])).toEqual([['member_budgets.update', 1, 2], ['member_budgets.update', 2, 3]]);
    });

    it('needs the budgets scope', async () => {
      const narrow = await tokenFor('admin', ['projects:read']);
      expect((await narrow.client.get('/member_budgets')).body.error?.code).toBe('insufficient_scope');
      const reader = await tokenFor('admin', ['budgets:read']);
      expect((await reader.client.get('/member_budgets')).status).toBe(200);
      expect((await reader.client.patch(`/member_budgets/${tenant.memberId}`, { spend_limit: null }, '"1"')).body.error?.code).toBe('insufficient_scope');
    });

    it('refuses create and delete, hides other organizations\' members, and needs an admin to write', async () => {
      expect((await client.post('/member_budgets', {})).body.error?.code).toBe('operation_not_supported');
      expect((await client.delete(`/member_budgets/${tenant.memberId}`, '"1"')).body.error?.code).toBe('operation_not_supported');
      const other = await createTenant(database.db);
      const stranger = await manageClient(api.url, other.token).get(`/member_budgets/${tenant.memberId}`);
      expect([stranger.status, stranger.body.error?.code]).toEqual([404, 'resource_not_found']);
      const member = await tokenFor('member');
      const current = await client.get<Budget>(`/member_budgets/${tenant.memberId}`);
      const refused = await member.client.patch(`/member_budgets/${tenant.memberId}`, { spend_limit: null }, current.etag!);
      expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_role']);
    });
  });

  describe('model_prices', () => {
    it('keeps one price per model and provider; provider must be a known kind', async () => {
      const first = await client.post('/model_prices', { model: 'acme-1', provider: 'openai', input_per_million: 1, output_per_million: 2 });
      expect(first.status).toBe(201);
      const anyProvider = await client.post('/model_prices', { model: 'acme-1', unit: 0.04, note: 'per image' });
      expect(anyProvider.body).toMatchObject({ provider: null, unit: 0.04 });
      const dup = await client.post('/model_prices', { model: 'acme-1', provider: 'openai', input_per_million: 3 });
      expect([dup.status, dup.body.error?.type]).toEqual([400, 'invalid_request_error']);
      const dupAny = await client.post('/model_prices', { model: 'acme-1', provider: null });
      expect(dupAny.status).toBe(400);
      const unknown = await client.post('/model_prices', { model: 'acme-1', provider: 'skynet' });
      expect([unknown.status, unknown.body.error?.code]).toEqual([400, 'unknown_provider']);
      const negative = await client.post('/model_prices', { model: 'acme-2', input_per_million: -1 });
      expect(negative.body.error?.message).toContain('input_per_million');
    });

    it('patches rates but never the model or provider', async () => {
      const { body } = await client.post<{ id: string }>('/model_prices', { model: 'acme-3', input_per_million: 1 });
      const res = await client.patch(`/model_prices/${body.id}`, { model: 'other' }, '"1"');
      expect(res.status).toBe(400);
      expect(res.body.error?.message).toContain('model');
    });
  });
});
