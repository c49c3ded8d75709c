import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';

type Center = { id: string; version: number; code: string; archived: boolean; archived_at: number | null };

/** Issue 23, section 1: cost centers' own rules beside the framework's (test/api/manage-resources.test.ts). */
describe('cost centers', () => {
  let f: ManagementFixture;
  beforeAll(async () => {
    f = await startManagementFixture();
  });
  afterAll(() => f.close());

  it('refuses a code another center of the organization uses, whatever its case, on create and on patch', async () => {
    const first = await f.client.post<Center>('/cost_centers', { name: 'Search', code: 'ENG.search' });
    expect(first.status).toBe(201);
    const twin = await f.client.post('/cost_centers', { name: 'Search again', code: 'eng.SEARCH' });
    expect([twin.status, twin.body.error?.type]).toEqual([400, 'invalid_request_error']);
    expect(twin.body.error?.message).toContain('code');

    const second = await f.client.post<Center>('/cost_centers', { name: 'Ads', code: 'ENG.ads' });
    const clash = await f.client.patch(`/cost_centers/${second.body.id}`, { code: 'ENG.Search' }, '"1"');
    expect([clash.status, clash.body.error?.message]).toEqual([400, expect.stringContaining('code')]);
    expect((await f.client.get<Center>(`/cost_centers/${second.body.id}`)).body).toMatchObject({ code: 'ENG.ads', version: 1 });
  });

  it('archives on delete: still readable and listed, marked archived', async () => {
    const center = await f.client.post<Center>('/cost_centers', { name: 'Old team', code: 'OLD-1' });
    const gone = await f.client.delete<Center>(`/cost_centers/${center.body.id}`, '"1"');
    expect(gone.status).toBe(200);
    expect(gone.body).toMatchObject({ archived: true, version: 2 });
    expect(gone.body.archived_at).toEqual(expect.any(Number));
    const read = await f.client.get<Center>(`/cost_centers/${center.body.id}`);
    expect(read.body).toMatchObject({ archived: true });
  });

  it('refuses a malformed code or owner email', async () => {
    for (const body of [{ name: 'x', code: 'x'.repeat(41) }, { name: 'x', code: 'a/b' }, { name: 'x', code: 'ok', owner_email: 'not-an-email' }]) {
      const res = await f.client.post('/cost_centers', body);
      expect(res.status).toBe(400);
    }
  });
});
