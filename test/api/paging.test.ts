import { and, desc, eq, sql } from 'drizzle-orm';
import { gatewayKeys, jobs, projects } from '../../core/db/schema';
import { newId } from '../../core/ids';
import { encodeCursor } from '../../core/paging';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { randomClientAddress } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

type Page = { object: string; data: { id: string }[]; has_more: boolean; next_cursor: string };
type Get = (path: string) => Promise<{ status: number; body: Page & { error?: { type: string; code: string | null; message: string } } }>;

/**
 * Spec 4.4 list envelope and issue 13 part 3: `limit` (1 to 100) and `after` on every list,
 * `has_more` and `next_cursor` exact, keyset order, stable under concurrent inserts.
 */
describe('paging of management lists and the job list', () => {
  let f: ManagementFixture;
  /** Management tokens are limited to 120 requests a minute each: walks take turns over several. */
  let clients: ReturnType<typeof manageClient>[];
  let turn = 0;
  const manage: Get = (path) => clients[turn++ % clients.length]!.get<Page>(path) as never;

  beforeAll(async () => {
    f = await startManagementFixture();
    clients = [];
    for (let i = 0; i < 6; i++) {
      const { token } = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: `pager ${i}`, scopes: ['*:read'], createdByMemberId: f.tenant.memberId });
      clients.push(manageClient(f.api.url, token));
    }
  });
  afterAll(() => f.close());

  /** Walks every page of `path` with `limit` (none: the default), checking each envelope; answers the ids in order. */
  async function walk(get: Get, path: string, limit: number | undefined, onPage?: (pageNo: number) => Promise<void>, defaultLimit = 50): Promise<string[]> {
    const seen: string[] = [];
    let after = '';
    for (let pageNo = 0; ; pageNo++) {
      const params = [limit === undefined ? null : `limit=${limit}`, after ? `after=${encodeURIComponent(after)}` : null].filter(Boolean).join('&');
      const res = await get(`${path}${params ? `${path.includes('?') ? '&' : '?'}${params}` : ''}`);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['data', 'has_more', 'next_cursor', 'object']);
      expect(res.body.object).toBe('list');
      seen.push(...res.body.data.map((d) => d.id));
      if (res.body.has_more) {
        // A page that has more is full, and says where to go on.
        expect(res.body.data).toHaveLength(limit ?? defaultLimit);
        expect(typeof res.body.next_cursor).toBe('string');
      } else {
        // Spec 2.1 types next_cursor as a string: empty on the last page (issue 20).
        expect(res.body.next_cursor).toBe('');
        expect(res.body.data.length).toBeLessThanOrEqual(limit ?? defaultLimit);
        return seen;
      }
      after = res.body.next_cursor;
      await onPage?.(pageNo);
    }
  }

  /** `count` projects straight into Postgres, in batches: rows of one batch share `created_at` (one transaction). */
  async function insertProjects(count: number, batch = 10, orgId = f.tenant.orgId, createdAt?: Date): Promise<string[]> {
    const ids: string[] = [];
    for (let start = 0; start < count; start += batch) {
      const values = Array.from({ length: Math.min(batch, count - start) }, () => {
        const id = newId('proj');
        ids.push(id);
        return { id, orgId, name: `paged ${id}`, slug: id.replace(/_/g, '-'), ...(createdAt && { createdAt }) };
      });
      await f.database.db.insert(projects).values(values);
    }
    return ids;
  }

  /** The projects list's order as Postgres has it: newest first by (created_at, id). */
  async function projectOrder(orgId = f.tenant.orgId): Promise<string[]> {
    const rows = await f.database.db.select({ id: projects.id }).from(projects).where(eq(projects.orgId, orgId)).orderBy(desc(projects.createdAt), desc(projects.id));
    return rows.map((r) => r.id);
  }

  describe('a resource list (projects)', () => {
    let expected: string[];

    beforeAll(async () => {
      await insertProjects(125);
      expected = await projectOrder();
      expect(expected.length).toBe(126);
    });

    it.each([[1], [50], [100], [undefined]])('walks every row once, newest first, with limit %s', async (limit) => {
      expect(await walk(manage, '/projects', limit)).toEqual(expected);
    });

    it('answers has_more and next_cursor exactly on the last page', async () => {
      const first = await manage('/projects?limit=100');
      expect([first.body.data.length, first.body.has_more, typeof first.body.next_cursor]).toEqual([100, true, 'string']);
      const rest = await manage(`/projects?limit=100&after=${first.body.next_cursor}`);
      expect(rest.body.data.map((p) => p.id)).toEqual(expected.slice(100));
      expect(rest.body).toMatchObject({ has_more: false, next_cursor: '' });
      // A page that ends exactly on the last row has no more.
      const cut = await manage(`/projects?limit=${expected.length - 100}&after=${first.body.next_cursor}`);
      expect(cut.body).toMatchObject({ has_more: false, next_cursor: '' });
      expect(cut.body.data).toHaveLength(expected.length - 100);
      const short = await manage(`/projects?limit=${expected.length - 101}&after=${first.body.next_cursor}`);
      expect(short.body).toMatchObject({ has_more: true, next_cursor: expect.any(String) });
      const last = await manage(`/projects?after=${short.body.next_cursor}`);
      expect(last.body.data.map((p) => p.id)).toEqual([expected.at(-1)]);
      expect(last.body).toMatchObject({ has_more: false, next_cursor: '' });
    });

    it('refuses a bad limit or cursor with 400 invalid_request_error', async () => {
      const bad = [
        ['limit=0', 'limit'], ['limit=101', 'limit'], ['limit=ten', 'limit'], ['limit=2.5', 'limit'], ['limit=', 'limit'],
        ['after=nonsense', 'after'],
        [`after=${encodeCursor({ at: 'yesterday', id: 'proj_x' })}`, 'after'],
        [`after=${encodeCursor({ at: '2024-13-45T00:00:00.000000Z', id: 'proj_x' })}`, 'after'],
        [`after=${Buffer.from('{"at":1}').toString('base64url')}`, 'after'],
        [`after=${'a'.repeat(600)}`, 'after'],
      ];
      for (const [query, param] of bad) {
        const res = await manage(`/projects?${query}`);
        expect([query, res.status, res.body.error?.type, res.body.error?.message]).toEqual([query, 400, 'invalid_request_error', expect.stringContaining(`\`${param}\``)]);
      }
      // The empty next_cursor of a last page passed back reads the first page (issue 20), not a 400.
      const fromStart = await manage('/projects?limit=3&after=');
      expect([fromStart.status, fromStart.body.data.map((p) => p.id)]).toEqual([200, (await manage('/projects?limit=3')).body.data.map((p) => p.id)]);
    });

    it('goes on after a cursor whose row was deleted since', async () => {
      const first = await manage('/projects?limit=10');
      const second = await manage(`/projects?limit=10&after=${first.body.next_cursor}`);
      await f.database.db.delete(projects).where(eq(projects.id, first.body.data.at(-1)!.id));
      const again = await manage(`/projects?limit=10&after=${first.body.next_cursor}`);
      expect(again.body.data.map((p) => p.id)).toEqual(second.body.data.map((p) => p.id));
      expected = await projectOrder();
    });

    it('under concurrent inserts shows every row that existed when the walk began exactly once', async () => {
      const before = await projectOrder();
      let walking = true;
      const inserted: string[] = [];
      // Inserts run while pages are read: some between pages, some while a page is being read.
      const inserter = (async () => {
        for (let round = 0; walking; round++) {
          inserted.push(...(await insertProjects(3, 3)));
          // Also rows dated among the existing ones (a writer whose transaction began earlier):
          // they land in pages not read yet, and must not push an existing row off a page.
          if (round % 2 === 0) inserted.push(...(await insertProjects(2, 2, f.tenant.orgId, new Date(Date.now() - 60_000 * Math.random()))));
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      const seen = await walk(manage, '/projects', 7, async (pageNo) => {
        if (pageNo % 3 === 0) inserted.push(...(await insertProjects(2, 2)));
      });
      walking = false;
      await inserter;
      expect(inserted.length).toBeGreaterThan(0);
      expect(new Set(seen).size).toBe(seen.length);
      for (const id of before) expect(seen.filter((s) => s === id)).toHaveLength(1);
      // In their order, and nothing else than rows made during the walk.
      const existed = new Set(before);
      expect(seen.filter((id) => existed.has(id))).toEqual(before);
      expect(seen.filter((id) => !existed.has(id) && !inserted.includes(id))).toEqual([]);
    });
  });

  it('pages a project-restricted token through full pages of its own projects\' keys only', async () => {
    const other = await insertProjects(1);
    const mine = f.tenant.projectId;
    const keys = (projectId: string, n: number) => Array.from({ length: n }, () => {
      const id = newId('key');
      return { id, orgId: f.tenant.orgId, projectId, label: id, secretHash: id, secretPrefix: 'gw_test', lineageId: id };
    });
    await f.database.db.insert(gatewayKeys).values([...keys(mine, 9), ...keys(other[0]!, 9)]);
    const { token } = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'restricted', scopes: ['*:read'], projectIds: [mine], createdByMemberId: f.tenant.memberId });
    const restricted = manageClient(f.api.url, token);
    const wanted = (await f.database.db.select({ id: gatewayKeys.id }).from(gatewayKeys)
      .where(and(eq(gatewayKeys.orgId, f.tenant.orgId), eq(gatewayKeys.projectId, mine), sql`${gatewayKeys.revokedAt} is null`))
      .orderBy(desc(gatewayKeys.createdAt), desc(gatewayKeys.id))).map((r) => r.id);
    expect(wanted.length).toBe(10);
    expect(await walk((p) => restricted.get<Page>(p) as never, '/gateway_keys', 3)).toEqual(wanted);
  });

  it('pages every list type with the same envelope and parameters', async () => {
    const lists = ['/projects', '/gateway_keys', '/provider_connections', '/routes', '/model_prices', '/webhook_endpoints', '/end_user_cap_rules', '/guardrail_policies', '/member_budgets', '/webhook_deliveries'];
    for (const path of lists) {
      const res = await manage(`${path}?limit=1`);
      expect([path, res.status, Object.keys(res.body).sort()]).toEqual([path, 200, ['data', 'has_more', 'next_cursor', 'object']]);
      expect([path, res.body.data.length <= 1, typeof res.body.next_cursor, res.body.has_more || res.body.next_cursor === '']).toEqual([path, true, 'string', true]);
      for (const bad of ['limit=0', 'limit=101', 'after=nonsense']) {
        const refused = await manage(`${path}?${bad}`);
        expect([path, bad, refused.status, refused.body.error?.type]).toEqual([path, bad, 400, 'invalid_request_error']);
      }
    }
    // The fixed list of provider kinds is one page in the same envelope.
    expect((await manage('/provider_kinds')).body).toMatchObject({ object: 'list', has_more: false, next_cursor: '' });
  });

  it('is documented in the OpenAPI document: limit and after on each list, next_cursor in its envelope', async () => {
    type Operation = { parameters?: { in: string; name: string; schema: Record<string, unknown> }[]; responses: Record<string, { content: Record<string, { schema: { properties: Record<string, unknown>; required?: string[] } }> }> };
    const document = (await (await fetch(`${f.api.url}/manage/v1/openapi.json`)).json()) as { paths: Record<string, { get?: Operation }> };
    for (const path of ['/projects', '/gateway_keys', '/model_prices', '/guardrail_policies', '/member_budgets', '/webhook_deliveries', '/end_user_cap_rules/{rule}/overrides']) {
      const op = document.paths[path]!.get!;
      const query = Object.fromEntries((op.parameters ?? []).filter((p) => p.in === 'query').map((p) => [p.name, p.schema]));
      expect([path, query.limit]).toEqual([path, expect.objectContaining({ minimum: 1, maximum: 100 })]);
      expect([path, query.after]).toEqual([path, expect.objectContaining({ type: 'string' })]);
      const envelope = op.responses['200']!.content['application/json']!.schema;
      expect([path, Object.keys(envelope.properties).sort()]).toEqual([path, ['data', 'has_more', 'next_cursor', 'object']]);
    }
    expect(document.paths['/projects']!.get!.parameters!.find((p) => p.name === 'limit')!.schema).toMatchObject({ default: 50 });
  });

  describe('the job list', () => {
    let tenant: Tenant;
    const jobsGet: Get = async (path) => {
      const res = await fetch(`${f.api.url}/v1${path}`, { headers: { authorization: `Bearer ${tenant.key.secret}`, 'x-forwarded-for': randomClientAddress() } });
      return { status: res.status, body: (await res.json()) as never };
    };

    /** Job rows straight into Postgres, of the tenant's key; ids of one batch may share a millisecond. */
    async function insertJobs(count: number): Promise<string[]> {
      const ids = Array.from({ length: count }, () => newId('job'));
      await f.database.db.insert(jobs).values(ids.map((id) => ({
        id, orgId: tenant.orgId, keyId: tenant.key.id, lineageId: tenant.key.id, projectId: tenant.projectId,
        type: 'video.generation', status: 'succeeded' as const, model: 'openai/sora-2', request: { prompt: 'paged' },
      })));
      return ids;
    }

    async function jobOrder(): Promise<string[]> {
      return (await f.database.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.orgId, tenant.orgId)).orderBy(desc(jobs.id))).map((r) => r.id);
    }

    beforeAll(async () => {
      tenant = await createTenant(f.database.db, { rateLimitRpm: 50000 });
      for (let i = 0; i < 6; i++) await insertJobs(25);
    });

    it('is an empty page with an empty next_cursor when there are no jobs', async () => {
      const empty = await createTenant(f.database.db);
      const res = await fetch(`${f.api.url}/v1/jobs`, { headers: { authorization: `Bearer ${empty.key.secret}`, 'x-forwarded-for': randomClientAddress() } });
      expect(await res.json()).toEqual({ object: 'list', data: [], has_more: false, next_cursor: '' });
    });

    it.each([[1], [20], [100], [undefined]])('walks every job once, newest first, with limit %s', async (limit) => {
      const expected = await jobOrder();
      expect(expected.length).toBe(150);
      // The job list's default page is 20 (spec 4.2).
      expect(await walk(jobsGet, '/jobs', limit, undefined, 20)).toEqual(expected);
    });

    it('refuses a bad limit or cursor with 400 invalid_request_error', async () => {
      for (const bad of ['limit=0', 'limit=101', 'limit=x', 'after=nonsense', `after=${encodeCursor({ at: 'x', id: 'y' }).slice(0, -3)}!`]) {
        const res = await jobsGet(`/jobs?${bad}`);
        expect([bad, res.status, res.body.error?.type]).toEqual([bad, 400, 'invalid_request_error']);
      }
    });

    it('under concurrent inserts shows every job that existed when the walk began exactly once', async () => {
      const before = await jobOrder();
      let walking = true;
      const inserted: string[] = [];
      const inserter = (async () => {
        while (walking) {
          inserted.push(...(await insertJobs(4)));
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      const seen = await walk(jobsGet, '/jobs', 9, async (pageNo) => {
        if (pageNo % 2 === 0) inserted.push(...(await insertJobs(3)));
      }, 20);
      walking = false;
      await inserter;
      expect(inserted.length).toBeGreaterThan(0);
      expect(new Set(seen).size).toBe(seen.length);
      for (const id of before) expect(seen.filter((s) => s === id)).toHaveLength(1);
      const existed = new Set(before);
      expect(seen.filter((id) => existed.has(id))).toEqual(before);
      expect(seen.filter((id) => !existed.has(id) && !inserted.includes(id))).toEqual([]);
    });
  });
});
