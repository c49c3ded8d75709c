import { eq } from 'drizzle-orm';
import { auditEvents, organizations } from '../../core/db/schema';
import { newId } from '../../core/ids';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import type { Loose } from '../helpers/chat-fixture';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';

type Event = {
  id: string; object: string; action: string; actor_token_id: string | null; actor_member_id: string | null;
  resource_type: string; resource_id: string; project_id: string | null; before_version: number | null; after_version: number | null; detail: Loose | null; created_at: number;
};
type Page = { object: string; data: Event[]; has_more: boolean; next_cursor: string };

const CONNECTION_SECRET = 'sk-audit-connection-secret-0001';
const REPLACED_SECRET = 'sk-audit-connection-secret-0002';
const DAY = 86_400_000;

/** `GET /manage/v1/audit_events` (issue 13): filters, keyset paging by `cursor`, scopes, history window, no secrets. */
describe('GET /manage/v1/audit_events', () => {
  let f: ManagementFixture;
  const revealed: string[] = [];
  let tokenId: string;
  let otherToken: { id: string; token: string };
  const projectIds: string[] = [];

  const list = async (query = '', client = f.client) => {
    const res = await client.get<Page>(`/audit_events${query}`);
    expect(res.status).toBe(200);
    return res.body;
  };
  /** Every event the query reaches, page by page. */
  async function all(query: string, client = f.client): Promise<Event[]> {
    const seen: Event[] = [];
    let cursor: string | null = null;
    do {
      const params = new URLSearchParams(query.replace(/^\?/, ''));
      if (cursor) params.set('cursor', cursor);
      const page: Page = await list(`?${params}`, client);
      seen.push(...page.data);
      expect(page.next_cursor === '').toBe(!page.has_more);
      cursor = page.next_cursor;
    } while (cursor);
    return seen;
  }

  beforeAll(async () => {
    f = await startManagementFixture();
    for (const name of ['Alpha', 'Beta', 'Gamma']) {
      const res = await f.client.post<{ id: string }>('/projects', { name });
      expect(res.status).toBe(201);
      projectIds.push(res.body.id);
    }
    const beta = await f.client.get(`/projects/${projectIds[1]}`);
    expect((await f.client.patch(`/projects/${projectIds[1]}`, { name: 'Beta 2' }, beta.etag!)).status).toBe(200);
    const key = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: 'audited', project_id: f.tenant.projectId });
    expect(key.status).toBe(201);
    revealed.push(key.body.secret);
    const rotated = await f.client.post<{ secret: string }>(`/gateway_keys/${key.body.id}/rotate`, { overlap_seconds: 0 });
    expect(rotated.status).toBe(200);
    revealed.push(rotated.body.secret);
    const connection = await f.client.post<{ id: string }>('/provider_connections', { kind: 'openai', name: 'audited', secret: CONNECTION_SECRET });
    expect(connection.status).toBe(201);
    const replaced = await f.client.post(`/provider_connections/${connection.body.id}/credential`, { secret: REPLACED_SECRET, validate: false });
    expect(replaced.status).toBe(200);
    const endpoint = await f.client.post<{ secret: string }>('/webhook_endpoints', { url: 'https://hooks.example.com/audit' });
    expect(endpoint.status).toBe(201);
    revealed.push(endpoint.body.secret);

    otherToken = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'second writer', scopes: ['*'], createdByMemberId: f.tenant.memberId });
    expect((await manageClient(f.api.url, otherToken.token).post('/projects', { name: 'By other token' })).status).toBe(201);

    const first = await list('?action=projects.create&limit=1');
    tokenId = (await all('?action=projects.create')).find((e) => e.actor_token_id !== otherToken.id)!.actor_token_id!;
    expect(first.data).toHaveLength(1);
  });
  afterAll(() => f?.close());

  it('answers every event newest first with actor, action, resource, versions and time, and no secret anywhere', async () => {
    const events = await all('');
    expect(events.length).toBeGreaterThanOrEqual(10);
    const times = events.map((e) => e.created_at);
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    const patched = events.find((e) => e.action === 'projects.update')!;
    expect(patched).toEqual({
      id: expect.any(String), object: 'audit_event', action: 'projects.update', actor_token_id: tokenId, actor_member_id: f.tenant.memberId,
      resource_type: 'projects', resource_id: projectIds[1], project_id: projectIds[1], before_version: 1, after_version: 2, detail: expect.any(Object), created_at: expect.any(Number),
    });
    expect(Math.abs(patched.created_at - Date.now() / 1000)).toBeLessThan(120);
    expect(events.map((e) => e.action)).toEqual(expect.arrayContaining(['gateway_keys.create', 'gateway_keys.rotate', 'provider_connections.create', 'provider_connections.credential', 'webhook_endpoints.create']));
    const serialized = JSON.stringify(events);
    for (const secret of [...revealed, CONNECTION_SECRET, REPLACED_SECRET]) expect(serialized).not.toContain(secret);
    expect(serialized).not.toMatch(/sealed|secret_hash/i);
  });

  it('filters by action, actor and free text', async () => {
    const creates = await all('?action=projects.create');
    expect(creates).toHaveLength(4);
    expect(creates.every((e) => e.action === 'projects.create')).toBe(true);

    const byOther = await all(`?actor=${otherToken.id}`);
    expect(byOther.map((e) => [e.action, e.actor_token_id])).toEqual([['projects.create', otherToken.id]]);
    const byMember = await all(`?actor=${f.tenant.memberId}`);
    expect(byMember.length).toBe((await all('')).length);
    expect(await all('?actor=nobody')).toEqual([]);

    // q matches the action, the resource id, and the actor, case-insensitively.
    const keys = await all('?q=GATEWAY_KEYS');
    expect(keys.map((e) => e.action).sort()).toEqual(['gateway_keys.create', 'gateway_keys.rotate']);
    const beta = await all(`?q=${projectIds[1]}`);
    expect(beta.map((e) => e.action).sort()).toEqual(['projects.create', 'projects.update']);
    expect((await all(`?q=${otherToken.id}`)).map((e) => e.actor_token_id)).toEqual([otherToken.id]);
    // LIKE wildcards match themselves.
    expect(await all('?q=%25')).toEqual([]);
    expect((await all('?q=credential&action=provider_connections.credential')).length).toBe(1);
  });

  it('filters by from and to as ISO 8601 or Unix seconds', async () => {
    const base = Date.now() - 3 * DAY;
    const rows = [0, 1, 2].map((i) => ({
      id: newId('aud'), orgId: f.tenant.orgId, actorTokenId: 'tok_window', actorMemberId: null, action: 'test.window', resourceType: 'test',
      resourceId: `w${i}`, beforeVersion: null, afterVersion: 1, detail: null, createdAt: new Date(base + i * 3_600_000),
    }));
    await f.database.db.insert(auditEvents).values(rows);
    const ids = (events: Event[]) => events.map((e) => e.resource_id);
    expect(ids(await all('?action=test.window'))).toEqual(['w2', 'w1', 'w0']);
    const fromIso = new Date(base + 3_600_000).toISOString();
    expect(ids(await all(`?action=test.window&from=${encodeURIComponent(fromIso)}`))).toEqual(['w2', 'w1']);
    const toUnix = Math.floor((base + 2 * 3_600_000) / 1000);
    expect(ids(await all(`?action=test.window&to=${toUnix}`))).toEqual(['w1', 'w0']);
    expect(ids(await all(`?action=test.window&from=${Math.floor((base + 1000) / 1000)}&to=${encodeURIComponent(new Date(base + 2 * 3_600_000 + 1000).toISOString())}`))).toEqual(['w2', 'w1']);
    for (const bad of ['from=yesterday', 'to=2025-13-45T00:00:00Z', 'limit=0', 'limit=101', 'cursor=nonsense', `cursor=${Buffer.from('["not a time","x"]').toString('base64url')}`]) {
      const res = await f.client.get<Loose>(`/audit_events?${bad}`);
      expect([bad, res.status, res.body.error?.type]).toEqual([bad, 400, 'invalid_request_error']);
    }
  });

  it('pages with limit and cursor: every event once, stable while new events arrive', async () => {
    const everything = await all('');
    const paged: Event[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Page = await list(`?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.data.length).toBeLessThanOrEqual(3);
      paged.push(...page.data);
      cursor = page.next_cursor;
      // A write between pages is newer than the cursor: it never shifts the pages still to come.
      if (pages++ === 0) expect((await f.client.post('/projects', { name: 'Arrived mid-paging' })).status).toBe(201);
    } while (cursor);
    expect(paged.map((e) => e.id)).toEqual(everything.map((e) => e.id));
    const defaults = await list('');
    expect(defaults.data.length).toBeLessThanOrEqual(50);
  });

  it('needs audit:read; another organization sees none of these events', async () => {
    const budgets = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'no audit', scopes: ['budgets:read', 'projects:read'], createdByMemberId: f.tenant.memberId });
    const refused = await manageClient(f.api.url, budgets.token).get<Loose>('/audit_events');
    expect([refused.status, refused.body.error?.code]).toEqual([403, 'insufficient_scope']);
    const auditor = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'auditor', scopes: ['audit:read'], createdByMemberId: f.tenant.memberId });
    expect((await list('', manageClient(f.api.url, auditor.token))).data.length).toBeGreaterThan(0);

    const stranger = await createTenant(f.database.db);
    const theirs = await all('', manageClient(f.api.url, stranger.token));
    expect(theirs).toEqual([]);
    expect(await all(`?q=${projectIds[0]}`, manageClient(f.api.url, stranger.token))).toEqual([]);
  });

  it('reaches back only the plan\'s history window, whatever `from` says', async () => {
    const old = (days: number) => ({
      id: newId('aud'), orgId: f.tenant.orgId, actorTokenId: 'tok_history', actorMemberId: null, action: 'test.history', resourceType: 'test',
      resourceId: `d${days}`, beforeVersion: null, afterVersion: 1, detail: null, createdAt: new Date(Date.now() - days * DAY),
    });
    await f.database.db.insert(auditEvents).values([old(2), old(10), old(40), old(100)]);
    const seen = async () => (await all('?action=test.history&from=0')).map((e) => e.resource_id);
    const setPlan = (plan: 'trial' | 'team' | 'business') => f.database.db.update(organizations).set({ plan }).where(eq(organizations.id, f.tenant.orgId));
    try {
      expect(await seen()).toEqual(['d2', 'd10', 'd40']);
      await setPlan('team');
      expect(await seen()).toEqual(['d2', 'd10']);
      await setPlan('trial');
      expect(await seen()).toEqual(['d2']);
    } finally {
      await setPlan('business');
    }
  });
});
