import { and, eq, gte, sql } from 'drizzle-orm';
import { spendLedger } from '../../core/db/schema';
import type { RedisHandle } from '../../core/redis';
import { holdSpend, windowKeys } from '../../core/spend/holds';
import { toNanos } from '../../core/spend/money';
import { scopeAt } from '../../core/spend/scopes';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { testRedis } from '../helpers/harness';
import { manageClient } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const hello = [{ role: 'user', content: 'Say hello' }];

type Status = {
  object: string; scope: string; id: string; project_id: string | null; key_id: string | null; lineage_id: string | null; member_id: string | null;
  rule_id: string | null; end_user_id: string | null; period: string; behavior: string; limit: number; spent: number; reserved: number; remaining: number;
  period_start: number | null; resets_at: number | null;
};

/**
 * `GET /manage/v1/budget_status` (issue 13): every enforced limit with the spend of its current
 * window, equal to the Postgres spend ledger after a mix of requests. Output costs $0.10 a token
 * and input nothing, so `max_tokens: n` costs $0.10 × n (n up to 6: the
 * sandbox's answer is six words).
 */
describe('GET /manage/v1/budget_status', () => {
  let f: ChatFixture;
  let redis: RedisHandle;
  let secondProject: string;
  let rule: { id: string };

  beforeAll(async () => {
    f = await startChatFixture();
    redis = testRedis();
    await f.connect('openai', { name: 'status openai' });
    expect((await f.client.post('/model_prices', { model: 'openai/gpt-4o', provider: 'openai', input_per_million: 0, output_per_million: 100_000 })).status).toBe(201);
    const settings = await f.client.get('/org_settings');
    expect((await f.client.patch('/org_settings', { hard_cap: { monthly: 1000, behavior: 'block' } }, settings.etag!)).status).toBe(200);
    const project = await f.client.get(`/projects/${f.tenant.projectId}`);
    expect((await f.client.patch(`/projects/${f.tenant.projectId}`, { spend_limit: { monthly: 800, behavior: 'block' } }, project.etag!)).status).toBe(200);
    const other = await f.client.post<{ id: string }>('/projects', { name: 'Second', spend_limit: { monthly: 300, behavior: 'alert', alert_at: [0.5] } });
    expect(other.status).toBe(201);
    secondProject = other.body.id;
    const budget = await f.client.get(`/member_budgets/${f.tenant.memberId}`);
    expect((await f.client.patch(`/member_budgets/${f.tenant.memberId}`, { spend_limit: { monthly: 500, behavior: 'block' } }, budget.etag!)).status).toBe(200);
    const created = await f.client.post<{ id: string }>('/end_user_cap_rules', { amount: '20', period: 'daily', behavior: 'block' });
    expect(created.status).toBe(201);
    rule = created.body;
    const put = await fetch(`${f.api.url}/manage/v1/end_user_cap_rules/${rule.id}/overrides/alice`, {
      method: 'PUT', headers: { authorization: `Bearer ${f.tenant.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ amount: '1.5' }),
    });
    expect(put.status).toBeLessThan(300);
    await f.settle();
  });
  afterAll(async () => {
    await redis?.close();
    await f?.close();
  });

  const status = async (client = f.client) => {
    const res = await client.get<{ object: string; data: Status[]; has_more: boolean }>('/budget_status');
    expect(res.status).toBe(200);
    return res.body;
  };

  /** A scope's settled sum over the spend_ledger table since `since` (seconds). */
  async function ledgerSum(column: 'lineage_id' | 'project_id' | 'member_id' | 'org_id' | 'end_user_scope', value: string, since: number | null): Promise<number> {
    const [row] = await f.database.db.select({ total: sql<string>`coalesce(sum(${spendLedger.amount}), 0)::text` }).from(spendLedger).where(and(
      eq(spendLedger.orgId, f.tenant.orgId),
      eq(spendLedger.state, 'settled'),
      sql`${sql.identifier(column)} = ${value}`,
      gte(spendLedger.createdAt, new Date((since ?? 0) * 1000)),
    ));
    return Number(row!.total);
  }

  const ask = (secret: string, tokens: number, user?: string) =>
    f.chat(secret, { model: 'openai/gpt-4o', messages: hello, max_tokens: tokens, ...(user && { metadata: { user_id: user } }) });

  let monthlyKey: string;
  let lifetimeKey: string;

  it('equals sums over the spend ledger for every scope after a mix of requests', async () => {
    monthlyKey = await f.key({ credit_limit: { amount: 100, period: 'monthly' } });
    lifetimeKey = await f.key({ credit_limit: { amount: 50, period: 'never' } });
    const plain = await f.key();
    const secondRes = await f.client.post<{ secret: string }>('/gateway_keys', { label: 'second', project_id: secondProject, credit_limit: { amount: 40, period: 'daily' } });
    expect(secondRes.status).toBe(201);
    const second = secondRes.body.secret;

    const answers = await Promise.all([
      ask(monthlyKey, 3, 'alice'),
      ask(monthlyKey, 5, 'bob'),
      ask(monthlyKey, 2),
      ask(lifetimeKey, 4, 'bob'),
      ask(lifetimeKey, 1, 'carol'),
      ask(plain, 6, 'dave'),
      ask(second, 4, 'bob'),
      ask(second, 2),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200, 200, 200]);
    // alice's override ($1.50) has no room for $0.30 × 10 more: refused, nothing spent.
    const refused = await ask(monthlyKey, 20, 'alice');
    expect([refused.status, refused.json.error?.code]).toEqual([402, 'end_user_budget']);
    await sleep(1000); // ledger rows land in batches

    const body = await status();
    expect(body).toMatchObject({ object: 'list', has_more: false });
    const kinds = body.data.map((s) => s.scope);
    // Organization first, then projects, members, keys and end customers.
    expect(kinds).toEqual([...kinds].sort((a, b) => ['organization', 'project', 'member', 'key', 'end_user'].indexOf(a) - ['organization', 'project', 'member', 'key', 'end_user'].indexOf(b)));

    const org = body.data.find((s) => s.scope === 'organization')!;
    expect(org).toMatchObject({ object: 'budget_status', id: f.tenant.orgId, limit: 1000, period: 'monthly', behavior: 'block', reserved: 0 });
    expect(org.spent).toBeCloseTo(2.7, 9);

    const projects = body.data.filter((s) => s.scope === 'project');
    expect(projects.map((p) => [p.id, p.limit, p.behavior]).sort()).toEqual([[f.tenant.projectId, 800, 'block'], [secondProject, 300, 'alert']].sort());
    const member = body.data.find((s) => s.scope === 'member')!;
    expect(member).toMatchObject({ id: f.tenant.memberId, member_id: f.tenant.memberId, limit: 500 });

    const keys = body.data.filter((s) => s.scope === 'key');
    // The tenant's own key and `plain` have no credit limit: not listed.
    expect(keys.map((k) => [k.limit, k.period]).sort()).toEqual([[100, 'monthly'], [40, 'daily'], [50, 'never']].sort());
    const lifetime = keys.find((k) => k.period === 'never')!;
    expect([lifetime.period_start, lifetime.resets_at]).toEqual([null, null]);

    const endUsers = body.data.filter((s) => s.scope === 'end_user');
    expect(endUsers.map((e) => [e.end_user_id, e.limit]).sort()).toEqual([['alice', 1.5], ['bob', 20], ['carol', 20], ['dave', 20]]);
    expect(endUsers.every((e) => e.rule_id === rule.id && e.period === 'daily' && e.id === `${rule.id}:${e.end_user_id}`)).toBe(true);

    // Every figure is the ledger's sum for that scope over its current window.
    const column = { organization: 'org_id', project: 'project_id', member: 'member_id', key: 'lineage_id', end_user: 'end_user_scope' } as const;
    for (const s of body.data) {
      const value = s.scope === 'key' ? s.lineage_id! : s.id;
      const expected = await ledgerSum(column[s.scope as keyof typeof column], value, s.period_start);
      expect([s.scope, s.id, s.spent]).toEqual([s.scope, s.id, expect.closeTo(expected, 9)]);
      expect(s.reserved).toBe(0);
      expect(s.remaining).toBeCloseTo(Math.max(0, s.limit - expected), 9);
      if (s.period !== 'never') expect(s.resets_at!).toBeGreaterThan(Date.now() / 1000);
    }
    // And the figures are what was asked: $0.10 a token.
    const spentBy = (pred: (s: Status) => boolean) => body.data.find(pred)!.spent;
    expect(spentBy((s) => s.scope === 'key' && s.period === 'monthly')).toBeCloseTo(1.0, 9);
    expect(spentBy((s) => s.scope === 'key' && s.period === 'never')).toBeCloseTo(0.5, 9);
    expect(spentBy((s) => s.scope === 'project' && s.id === secondProject)).toBeCloseTo(0.6, 9);
    expect(spentBy((s) => s.scope === 'project' && s.id === f.tenant.projectId)).toBeCloseTo(2.1, 9);
    expect(spentBy((s) => s.end_user_id === 'bob')).toBeCloseTo(1.3, 9);
    expect(spentBy((s) => s.end_user_id === 'alice')).toBeCloseTo(0.3, 9);
  });

  it('shows live holds as reserved and rebuilds a lost counter from the ledger', async () => {
    const before = await status();
    const key = before.data.find((s) => s.scope === 'key' && s.period === 'monthly')!;
    const billingDay = (await f.client.get<{ billing_day_of_month: number }>('/org_settings')).body.billing_day_of_month;
    const now = new Date();
    const window = scopeAt(f.tenant.orgId, { kind: 'key', id: key.lineage_id!, code: 'key_budget', limit: 100, blocking: true, period: 'monthly', ledger: { column: 'lineage_id', value: key.lineage_id! } }, now, billingDay);
    expect(Math.floor(window.windowStart.getTime() / 1000)).toBe(key.period_start);
    const live = await holdSpend(redis.redis, 'hold_status_live', [window], toNanos(2.5), now, new Date(now.getTime() + 60_000));
    const expired = await holdSpend(redis.redis, 'hold_status_gone', [window], toNanos(4), now, new Date(now.getTime() - 1000));
    expect([live.state, expired.state]).toEqual(['ok', 'ok']);

    const held = (await status()).data.find((s) => s.id === key.id)!;
    expect(held.spent).toBeCloseTo(key.spent, 9);
    expect(held.reserved).toBeCloseTo(2.5, 9); // the lapsed hold no longer counts
    expect(held.remaining).toBeCloseTo(100 - key.spent - 2.5, 9);

    // The settled counter lost with Redis: rebuilt from Postgres, same figure.
    await redis.redis.del(windowKeys(window)[0]);
    const rebuilt = (await status()).data.find((s) => s.id === key.id)!;
    expect(rebuilt.spent).toBeCloseTo(key.spent, 9);
    expect(await redis.redis.get(windowKeys(window)[0])).not.toBeNull();
  });

  it('needs budgets:read, and shows nothing of another organization', async () => {
    const without = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'audit only', scopes: ['audit:read'], createdByMemberId: f.tenant.memberId });
    const refused = await manageClient(f.api.url, without.token).get<Loose>('/budget_status');
    expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_scope']);
    const reader = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'budgets', scopes: ['budgets:read'], createdByMemberId: f.tenant.memberId });
    expect((await status(manageClient(f.api.url, reader.token))).data.length).toBeGreaterThan(5);

    const stranger = await createTenant(f.database.db);
    const theirs = await status(manageClient(f.api.url, stranger.token));
    expect(theirs.data).toEqual([]);
  });

  it('shows a project-restricted token only its projects\' limits beside organization-wide ones', async () => {
    const restricted = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'second only', scopes: ['budgets:read'], createdByMemberId: f.tenant.memberId, projectIds: [secondProject] });
    const seen = await status(manageClient(f.api.url, restricted.token));
    expect(seen.data.filter((s) => s.project_id !== null).every((s) => s.project_id === secondProject)).toBe(true);
    expect(seen.data.some((s) => s.scope === 'organization')).toBe(true);
    expect(seen.data.some((s) => s.scope === 'project' && s.id === secondProject)).toBe(true);
  });

  it('under a project rule lists both counters of a customer: the organization rule\'s holds their spend in every project', async () => {
    const projectRule = await f.client.post<{ id: string; version: number }>('/end_user_cap_rules', { project_id: secondProject, amount: '5', period: 'daily', behavior: 'block' });
    expect(projectRule.status).toBe(201);
    await f.settle();
    const inSecond = await f.client.post<{ secret: string }>('/gateway_keys', { label: 'second erin', project_id: secondProject });
    expect(inSecond.status).toBe(201);
    const inFirst = await f.key();
    expect((await ask(inSecond.body.secret, 4, 'erin')).status).toBe(200);
    expect((await ask(inFirst, 3, 'erin')).status).toBe(200);
    await sleep(1000);
    const erin = (await status()).data.filter((s) => s.end_user_id === 'erin');
    expect(erin.map((e) => [e.rule_id, e.limit, e.spent]).sort()).toEqual([
      [rule.id, 20, expect.closeTo(0.7, 9)],
      [projectRule.body.id, 5, expect.closeTo(0.4, 9)],
    ].sort());
    // A lost organization-rule counter is rebuilt from every project's rows of that customer.
    const orgEntry = erin.find((e) => e.rule_id === rule.id)!;
    const window = scopeAt(f.tenant.orgId, { kind: 'end_user', id: orgEntry.id, code: 'end_user_budget', limit: 20, blocking: true, period: 'daily', ledger: { column: 'end_user_id', value: 'erin' } }, new Date(), 1);
    await redis.redis.del(windowKeys(window)[0]);
    expect((await status()).data.find((s) => s.id === orgEntry.id)!.spent).toBeCloseTo(0.7, 9);
    expect((await f.client.delete(`/end_user_cap_rules/${projectRule.body.id}`, `"${projectRule.body.version}"`)).status).toBe(200);
  });
});
