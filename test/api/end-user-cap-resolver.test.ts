import type { Executor } from '../../core/db/client';
import { endUserCapOverrides, endUserCapRules } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import type { OrgConfigCache } from '../../core/routing/org-config';
import {
  decimalDollarsToNanos,
  endUserBudgetError,
  endUserBudgetFields,
  endUserCapResetsAt,
  endUserIdRequiredError,
  normalizeDecimalDollars,
  resolveEndUserCap,
  type EndUserCap,
} from '../../core/spend/end-user-caps';
import { createProject } from '../../core/tenancy/gateway-keys';
import type { ManagementFixture } from '../helpers/manage-client';
import { startManagementFixture } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

/**
 * Issue 10, section 2: which end-customer cap applies to a request, resolved against real
 * Postgres through the API process's own config cache, which management writes invalidate over
 * Redis pub/sub.
 */

/** The database, counting every query the resolver starts. */
function countingDb(db: Executor): { db: Executor; queries: () => number } {
  let queries = 0;
  const proxy = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === 'select') queries += 1;
      return Reflect.get(target, prop, receiver);
    },
  });
  return { db: proxy, queries: () => queries };
}

/** Polls until the answer satisfies `done` (a config change reaches the API over Redis asynchronously). */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function put(fixture: ManagementFixture, token: string, path: string, body: unknown) {
  const res = await fetch(`${fixture.api.url}/manage/v1${path}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('resolveEndUserCap', () => {
  let fixture: ManagementFixture;
  let orgConfig: OrgConfigCache;
  let db: Executor;

  beforeAll(async () => {
    fixture = await startManagementFixture();
    orgConfig = fixture.api.runtime.deps.gateway.orgConfig;
    db = fixture.api.runtime.deps.db;
  });
  afterAll(() => fixture.close());

  /** Rules written straight to Postgres, in an organization nobody has cached yet. */
  async function tenantWithRules(rules: { project?: boolean; amount: string | null; period?: 'daily' | 'weekly' | 'monthly'; behavior?: 'block' | 'alert'; missingId?: 'serve' | 'refuse'; enabled?: boolean; overrides?: Record<string, string> }[]) {
    const tenant = await createTenant(fixture.database.db);
    const ids: string[] = [];
    for (const r of rules) {
      const id = newId('eucap');
      ids.push(id);
      await fixture.database.db.insert(endUserCapRules).values({
        id, orgId: tenant.orgId, projectId: r.project ? tenant.projectId : null, amount: r.amount,
        period: r.period ?? 'daily', behavior: r.behavior ?? 'block', missingId: r.missingId ?? 'serve', enabled: r.enabled ?? true,
      });
      for (const [endUserId, amount] of Object.entries(r.overrides ?? {})) {
        await fixture.database.db.insert(endUserCapOverrides).values({ ruleId: id, endUserId, amount });
      }
    }
    return { tenant, ids };
  }

  const resolve = (tenant: Tenant, endUserId: string | null | undefined, projectId: string | null = tenant.projectId, on: Executor = db) =>
    resolveEndUserCap({ db: on, orgConfig }, { orgId: tenant.orgId, projectId, endUserId });

  it('answers null when no enabled rule applies', async () => {
    const { tenant } = await tenantWithRules([]);
    expect(await resolve(tenant, 'alice')).toBeNull();
    const disabled = await tenantWithRules([{ amount: '5', enabled: false }, { project: true, amount: '1', enabled: false }]);
    expect(await resolve(disabled.tenant, 'alice')).toBeNull();
  });

  it('applies the organization rule, with an override replacing the default amount for that customer', async () => {
    const { tenant, ids } = await tenantWithRules([{ amount: '5.25', period: 'weekly', missingId: 'refuse', overrides: { vip: '100', zero: '0' } }]);
    const base: Omit<EndUserCap, 'amount' | 'amountNanos' | 'endUserId'> = { ruleId: ids[0]!, scope: 'organization', period: 'weekly', behavior: 'block', missingId: 'refuse', within: null };
    expect(await resolve(tenant, 'alice')).toEqual({ ...base, amount: 5.25, amountNanos: 5_250_000_000n, endUserId: 'alice' });
    expect(await resolve(tenant, 'vip')).toEqual({ ...base, amount: 100, amountNanos: 100_000_000_000n, endUserId: 'vip' });
    expect(await resolve(tenant, 'zero')).toEqual({ ...base, amount: 0, amountNanos: 0n, endUserId: 'zero' });
    // No customer named: the rule still answers, so the caller can apply missing_id.
    for (const absent of [undefined, null, '']) expect(await resolve(tenant, absent)).toEqual({ ...base, amount: 5.25, amountNanos: 5_250_000_000n, endUserId: null });
    // Keys of any project, and none, fall under the organization rule.
    const other = await createProject(fixture.database.db, { orgId: tenant.orgId, name: 'other' });
    expect((await resolve(tenant, 'vip', other))?.amount).toBe(100);
    expect((await resolve(tenant, 'vip', null))?.amount).toBe(100);
  });

  it('a rule without a default amount caps only overridden customers', async () => {
    const { tenant } = await tenantWithRules([{ amount: null, behavior: 'alert', overrides: { capped: '3' } }]);
    expect(await resolve(tenant, 'free')).toMatchObject({ amount: null, amountNanos: null, behavior: 'alert' });
    expect(await resolve(tenant, 'capped')).toMatchObject({ amount: 3, amountNanos: 3_000_000_000n });
  });

  it('a project rule governs its project and the organization rule stays in force beside it, each with its own overrides', async () => {
    const same = await tenantWithRules([
      { amount: '10', overrides: { vip: '50', low: '2' } },
      { project: true, amount: '20', missingId: 'refuse', overrides: { vip: '40' } },
    ]);
    const [orgRule, projectRule] = same.ids;
    const orgCap = (amount: number) => ({ ruleId: orgRule, scope: 'organization', amount, period: 'daily', behavior: 'block' });
    // Each rule's own amount for the customer: an override replaces its own rule's default only.
    expect(await resolve(same.tenant, 'alice')).toMatchObject({ ruleId: projectRule, scope: `project:${same.tenant.projectId}`, amount: 20, missingId: 'refuse', within: orgCap(10) });
    expect(await resolve(same.tenant, 'vip')).toMatchObject({ ruleId: projectRule, amount: 40, within: orgCap(50) });
    expect(await resolve(same.tenant, 'low')).toMatchObject({ ruleId: projectRule, amount: 20, within: orgCap(2) });
    expect(await resolve(same.tenant, null)).toMatchObject({ ruleId: projectRule, amount: 20, endUserId: null, within: orgCap(10) });
    // Another project's keys stay under the organization rule alone.
    const other = await createProject(fixture.database.db, { orgId: same.tenant.orgId, name: 'other' });
    expect(await resolve(same.tenant, 'vip', other)).toMatchObject({ ruleId: orgRule, scope: 'organization', amount: 50, within: null });

    // A project rule with no default cap still meets the organization's.
    const uncapped = await tenantWithRules([{ amount: '10' }, { project: true, amount: null }]);
    expect(await resolve(uncapped.tenant, 'alice')).toMatchObject({ ruleId: uncapped.ids[1], amount: null, within: { ruleId: uncapped.ids[0], amount: 10 } });

    // Different periods and alert-only rules: both stay in force, each with its own period and behavior.
    const periods = await tenantWithRules([{ amount: '1', period: 'daily' }, { project: true, amount: '20', period: 'monthly' }]);
    expect(await resolve(periods.tenant, 'alice')).toMatchObject({ ruleId: periods.ids[1], amount: 20, period: 'monthly', within: { amount: 1, period: 'daily' } });
    const alertProject = await tenantWithRules([{ amount: '1' }, { project: true, amount: '20', behavior: 'alert' }]);
    expect(await resolve(alertProject.tenant, 'alice')).toMatchObject({ ruleId: alertProject.ids[1], behavior: 'alert', within: { amount: 1, behavior: 'block' } });
    // Either rule refusing a request without a customer refuses it.
    const strictOrg = await tenantWithRules([{ amount: '1', missingId: 'refuse' }, { project: true, amount: '20', missingId: 'serve' }]);
    expect(await resolve(strictOrg.tenant, null)).toMatchObject({ missingId: 'refuse' });

    // A disabled project rule leaves the organization rule in force.
    const off = await tenantWithRules([{ amount: '3' }, { project: true, amount: '1', enabled: false }]);
    expect(await resolve(off.tenant, 'alice')).toMatchObject({ ruleId: off.ids[0], amount: 3 });
    // Only a project rule: the organization's other projects are uncapped.
    const only = await tenantWithRules([{ project: true, amount: '4' }]);
    expect(await resolve(only.tenant, 'alice')).toMatchObject({ ruleId: only.ids[0], amount: 4 });
    expect(await resolve(only.tenant, 'alice', other)).toBeNull();
  });

  it('reads no Postgres on a warm path, for customers with and without an override', async () => {
    const { tenant } = await tenantWithRules([{ amount: '5', overrides: { vip: '9' } }]);
    const counting = countingDb(db);
    expect((await resolve(tenant, 'vip', tenant.projectId, counting.db))?.amount).toBe(9);
    expect((await resolve(tenant, 'nobody', tenant.projectId, counting.db))?.amount).toBe(5);
    const cold = counting.queries();
    expect(cold).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) {
      expect((await resolve(tenant, 'vip', tenant.projectId, counting.db))?.amount).toBe(9);
      expect((await resolve(tenant, 'nobody', tenant.projectId, counting.db))?.amount).toBe(5);
    }
    expect(counting.queries()).toBe(cold);
  });

  it('sees management writes once their config change arrives: rules created, patched, deleted; overrides set and removed', async () => {
    const tenant = await createTenant(fixture.database.db);
    const token = tenant.token;
    const call = async (method: string, path: string, body?: unknown, ifMatch?: string) => {
      const res = await fetch(`${fixture.api.url}/manage/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }), ...(ifMatch && { 'if-match': ifMatch }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const current = () => resolve(tenant, 'cust');

    expect(await current()).toBeNull();
    const created = await call('POST', '/end_user_cap_rules', { amount: '5', period: 'daily' });
    expect(created.status).toBe(201);
    const ruleId = created.body.id as string;
    expect(await eventually(current, (c) => c !== null)).toMatchObject({ ruleId, amount: 5 });

    // Warm now; an override write must still be seen.
    expect((await put(fixture, token, `/end_user_cap_rules/${ruleId}/overrides/cust`, { amount: '12.5' })).status).toBe(201);
    expect(await eventually(current, (c) => c?.amount === 12.5)).toMatchObject({ amount: 12.5 });
    expect((await put(fixture, token, `/end_user_cap_rules/${ruleId}/overrides/cust`, { amount: '0.75' })).status).toBe(200);
    expect(await eventually(current, (c) => c?.amount === 0.75)).toMatchObject({ amount: 0.75 });
    expect((await call('DELETE', `/end_user_cap_rules/${ruleId}/overrides/cust`)).status).toBe(200);
    expect(await eventually(current, (c) => c?.amount === 5)).toMatchObject({ amount: 5 });

    expect((await call('PATCH', `/end_user_cap_rules/${ruleId}`, { amount: '7', period: 'monthly' }, '"1"')).status).toBe(200);
    expect(await eventually(current, (c) => c?.amount === 7)).toMatchObject({ amount: 7, period: 'monthly' });
    expect((await call('PATCH', `/end_user_cap_rules/${ruleId}`, { enabled: false }, '"2"')).status).toBe(200);
    expect(await eventually(current, (c) => c === null)).toBeNull();
    expect((await call('PATCH', `/end_user_cap_rules/${ruleId}`, { enabled: true }, '"3"')).status).toBe(200);
    expect(await eventually(current, (c) => c !== null)).toMatchObject({ amount: 7 });
    expect((await call('DELETE', `/end_user_cap_rules/${ruleId}`, undefined, '"4"')).status).toBe(200);
    expect(await eventually(current, (c) => c === null)).toBeNull();
  });

  it('keeps organizations apart', async () => {
    const a = await tenantWithRules([{ amount: '1', overrides: { same: '2' } }]);
    const b = await tenantWithRules([{ amount: '3', overrides: { same: '4' } }]);
    expect((await resolve(a.tenant, 'same'))?.amount).toBe(2);
    expect((await resolve(b.tenant, 'same'))?.amount).toBe(4);
    // A project id of another organization finds no project rule.
    expect((await resolve(a.tenant, 'same', b.tenant.projectId))?.ruleId).toBe(a.ids[0]);
  });
});

describe('end_user_budget and end_user_id_required errors', () => {
  it('carries scope, end_user_id, period and resets_at (ISO 8601 UTC) beside type and code', () => {
    const now = new Date('2026-03-18T15:04:05.678Z'); // a Wednesday
    const err = endUserBudgetError({ scope: 'project:proj_1', period: 'weekly' }, 'alice', now, 1);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.status).toBe(402);
    expect(err.toBody()).toEqual({
      error: {
        message: expect.stringContaining('alice'),
        type: 'budget_exceeded',
        code: 'end_user_budget',
        scope: 'project:proj_1',
        end_user_id: 'alice',
        period: 'weekly',
        resets_at: '2026-03-23T00:00:00.000Z',
      },
    });
    expect(endUserBudgetFields({ scope: 'organization', period: 'daily' }, 'bob', now, 1)).toEqual({ scope: 'organization', end_user_id: 'bob', period: 'daily', resets_at: '2026-03-19T00:00:00.000Z' });

    const required = endUserIdRequiredError();
    expect([required.status, required.type, required.code]).toEqual([400, 'invalid_request_error', 'end_user_id_required']);
    expect(required.message).toContain('metadata.user_id');
  });

  it('resets daily at midnight UTC, weekly on Monday, monthly on the billing day', () => {
    const at = (iso: string, period: 'daily' | 'weekly' | 'monthly', billingDay = 1) => endUserCapResetsAt(period, new Date(iso), billingDay).toISOString();
    expect(at('2026-12-31T23:59:59.999Z', 'daily')).toBe('2027-01-01T00:00:00.000Z');
    expect(at('2026-03-16T00:00:00.000Z', 'daily')).toBe('2026-03-17T00:00:00.000Z');
    expect(at('2026-03-16T00:00:00.000Z', 'weekly')).toBe('2026-03-23T00:00:00.000Z'); // a Monday: the next one
    expect(at('2026-03-22T23:59:59.000Z', 'weekly')).toBe('2026-03-23T00:00:00.000Z'); // a Sunday
    expect(at('2026-03-18T10:00:00.000Z', 'monthly')).toBe('2026-04-01T00:00:00.000Z');
    expect(at('2026-03-18T10:00:00.000Z', 'monthly', 15)).toBe('2026-04-15T00:00:00.000Z');
    expect(at('2026-03-10T10:00:00.000Z', 'monthly', 15)).toBe('2026-03-15T00:00:00.000Z');
    expect(at('2026-12-28T00:00:00.000Z', 'monthly', 28)).toBe('2027-01-28T00:00:00.000Z');
    expect(at('2026-01-05T00:00:00.000Z', 'monthly', 28)).toBe('2026-01-28T00:00:00.000Z');
  });

  it('keeps decimal amounts exact', () => {
    expect(decimalDollarsToNanos('1000000000')).toBe(1_000_000_000_000_000_000n);
    expect(decimalDollarsToNanos('0.000000001')).toBe(1n);
    expect(decimalDollarsToNanos('12.5')).toBe(12_500_000_000n);
    expect(normalizeDecimalDollars('007.1000')).toBe('7.1');
    expect(normalizeDecimalDollars('0.0')).toBe('0');
    expect(() => decimalDollarsToNanos('1e3')).toThrow();
  });
});
