import { eq } from 'drizzle-orm';
import { costCenterRuleVersions } from '../../core/db/schema';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';

type Rule = { id: string; version: number; version_id: string; priority: number; cost_center_id: string | null; allocation: unknown; match: unknown; note: string | null };
type Version = { id: string; version: number; ended: boolean; priority: number; cost_center_id: string | null; allocation: unknown; effective_at: number; actor_token_id: string | null };

/** Issue 23, section 1: cost-center rules versioned by appending (spec 9.3), and their refusals. */
describe('cost-center rules', () => {
  let f: ManagementFixture;
  let a: string;
  let b: string;
  let c: string;
  beforeAll(async () => {
    f = await startManagementFixture();
    const center = async (code: string) => (await f.client.post<{ id: string }>('/cost_centers', { name: code, code })).body.id;
    [a, b, c] = [await center('A'), await center('B'), await center('C')];
  });
  afterAll(() => f.close());

  it('keeps the lineage id; each create, patch and delete appends a version, merged over the current rule', async () => {
    const created = await f.client.post<Rule>('/cost_center_rules', { match: { project_id: f.tenant.projectId, tags: { team: 'search*' } }, priority: 10, cost_center_id: a });
    expect(created.status).toBe(201);
    expect(created.body.id).toMatch(/^ccr_/);
    const first = created.body.version_id;

    const split = await f.client.patch<Rule>(`/cost_center_rules/${created.body.id}`, { allocation: [{ cost_center_id: a, percent: 33.33 }, { cost_center_id: b, percent: 33.33 }, { cost_center_id: c, percent: 33.34 }] }, '"1"');
    expect(split.status).toBe(200);
    // Merged: the match and priority stay; the split replaces the single center.
    expect(split.body).toMatchObject({ id: created.body.id, version: 2, priority: 10, cost_center_id: null, match: { project_id: f.tenant.projectId, tags: { team: 'search*' } } });
    expect(split.body.version_id).not.toBe(first);

    const noted = await f.client.patch<Rule>(`/cost_center_rules/${created.body.id}`, { note: 'shared', cost_center_id: b }, '"2"');
    expect(noted.body).toMatchObject({ version: 3, note: 'shared', cost_center_id: b, allocation: null });

    expect((await f.client.delete(`/cost_center_rules/${created.body.id}`, '"3"')).status).toBe(200);
    expect((await f.client.get(`/cost_center_rules/${created.body.id}`)).status).toBe(404);

    // An ended rule is gone from reads, its versions with it; they stay recorded, the last one final.
    expect((await f.client.get(`/cost_center_rules/${created.body.id}/versions`)).status).toBe(404);
    const recorded = await f.database.db.select().from(costCenterRuleVersions).where(eq(costCenterRuleVersions.ruleId, created.body.id)).orderBy(costCenterRuleVersions.version);
    expect(recorded.map((v) => [v.version, v.ended, v.costCenterId])).toEqual([[1, false, a], [2, false, null], [3, false, b], [4, true, b]]);
    expect(recorded[0]!.id).toBe(first);
  });

  it('lists the versions of a live rule, oldest first, with their effective time and actor', async () => {
    const created = await f.client.post<Rule>('/cost_center_rules', { match: { model: 'claude-*' }, priority: 20, cost_center_id: a });
    await f.client.patch(`/cost_center_rules/${created.body.id}`, { priority: 15 }, '"1"');
    const versions = await f.client.get<{ object: string; data: Version[] }>(`/cost_center_rules/${created.body.id}/versions`);
    expect(versions.status).toBe(200);
    expect(versions.body.object).toBe('list');
    expect(versions.body.data.map((v) => [v.version, v.priority, v.ended])).toEqual([[1, 20, false], [2, 15, false]]);
    expect(versions.body.data[0]!.id).toBe(created.body.version_id);
    expect(versions.body.data.every((v) => typeof v.effective_at === 'number' && v.actor_token_id !== null)).toBe(true);
    const paged = await f.client.get<{ data: Version[]; has_more: boolean; next_cursor: string | null }>(`/cost_center_rules/${created.body.id}/versions?limit=1`);
    expect(paged.body.data.map((v) => v.version)).toEqual([1]);
    const next = await f.client.get<{ data: Version[] }>(`/cost_center_rules/${created.body.id}/versions?limit=1&after=${encodeURIComponent(paged.body.next_cursor!)}`);
    expect(next.body.data.map((v) => v.version)).toEqual([2]);
  });

  it('refuses percents not summing to 100, more than two decimals, both targets, neither, and an unknown center', async () => {
    const bad = [
      [{ match: {}, priority: 1, allocation: [{ cost_center_id: a, percent: 50 }, { cost_center_id: b, percent: 49.99 }] }, 'allocation'],
      [{ match: {}, priority: 1, allocation: [{ cost_center_id: a, percent: 33.333 }, { cost_center_id: b, percent: 66.667 }] }, 'allocation'],
      [{ match: {}, priority: 1, cost_center_id: a, allocation: [{ cost_center_id: b, percent: 100 }] }, 'allocation'],
      [{ match: {}, priority: 1 }, 'cost_center_id'],
      [{ match: {}, priority: 1, cost_center_id: 'ccen_nope' }, 'cost_center_id'],
      [{ match: {}, priority: 1, allocation: [{ cost_center_id: 'ccen_nope', percent: 100 }] }, 'allocation'],
      [{ match: { color: 'red' }, priority: 1, cost_center_id: a }, 'color'],
    ] as const;
    for (const [body, field] of bad) {
      const res = await f.client.post('/cost_center_rules', body);
      expect([res.status, res.body.error?.type]).toEqual([400, 'invalid_request_error']);
      expect(res.body.error?.message).toContain(field);
    }
  });

  it('refuses another organization\'s center, and hides its rules and their versions (404)', async () => {
    const other = await createTenant(f.database.db);
    const stranger = manageClient(f.api.url, other.token);
    const theirs = await stranger.post('/cost_center_rules', { match: {}, priority: 1, cost_center_id: a });
    expect(theirs.status).toBe(400);
    const mine = await f.client.post<Rule>('/cost_center_rules', { match: {}, priority: 1, cost_center_id: a });
    expect((await stranger.get(`/cost_center_rules/${mine.body.id}`)).status).toBe(404);
    expect((await stranger.get(`/cost_center_rules/${mine.body.id}/versions`)).status).toBe(404);
  });
});
