import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';
import { manageClient } from '../helpers/manage-client';

type Route = { id: string; version: number; slug: string; failover: Record<string, string>; rules: unknown[]; targets: unknown[]; environments: string[]; environment: string | null };

describe('routes', () => {
  let fixture: ManagementFixture;
  let client: ManagementFixture['client'];
  let connectionId: string;
  let seq = 0;
  const slug = () => `route-${Date.now().toString(36)}-${seq++}`;

  beforeAll(async () => {
    fixture = await startManagementFixture();
    client = fixture.client;
    connectionId = (await client.post<{ id: string }>('/provider_connections', { kind: 'openai', name: 'routes target', secret: 'sk-x' })).body.id;
  });
  afterAll(() => fixture.close());

  const target = (model = 'gpt-4o-mini') => ({ connection_id: connectionId, model });

  it('reads every failure kind, omitted ones as retry; a patch replaces the map', async () => {
    const res = await client.post<Route>('/routes', { slug: slug(), targets: [target()], failover: { rate_limit: 'failover', credential: 'stop' } });
    expect(res.body.failover).toEqual({ rate_limit: 'failover', server_error: 'retry', timeout: 'retry', connection: 'retry', credential: 'stop', moderation: 'retry' });
    const patched = await client.patch<Route>(`/routes/${res.body.id}`, { failover: { timeout: 'failover' } }, '"1"');
    expect(patched.body.failover).toMatchObject({ rate_limit: 'retry', timeout: 'failover', credential: 'retry' });
    const bad = await client.patch(`/routes/${res.body.id}`, { failover: { timeout: 'panic' } }, '"2"');
    expect(bad.status).toBe(400);
    const badKind = await client.patch(`/routes/${res.body.id}`, { failover: { sunspots: 'retry' } }, '"2"');
    expect(badKind.status).toBe(400);
  });

  it('keeps rules in the shape given, up to 20; omitting rules on patch keeps them', async () => {
    const rule = { name: 'long prompts', conditions: { all: [{ field: 'input_tokens', op: 'gt', value: 8000 }] }, match: { metadata: { tier: 'gold' } }, strategy: 'weighted', fallthrough: true, targets: [{ ...target('gpt-4o'), weight: 3 }] };
    const res = await client.post<Route>('/routes', { slug: slug(), strategy: 'priority', targets: [target()], rules: [rule] });
    expect(res.status).toBe(201);
    expect(res.body.rules).toEqual([rule]);
    const patched = await client.patch<Route>(`/routes/${res.body.id}`, { description: 'kept rules' }, '"1"');
    expect(patched.body.rules).toEqual([rule]);
    const replaced = await client.patch<Route>(`/routes/${res.body.id}`, { rules: [] }, '"2"');
    expect(replaced.body.rules).toEqual([]);
    const tooMany = await client.post('/routes', { slug: slug(), targets: [target()], rules: Array.from({ length: 21 }, (_, i) => ({ ...rule, name: `r${i}` })) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error?.message).toContain('rules');
  });

  it('needs targets naming live connections of the organization; a patch replaces the whole list', async () => {
    const missing = await client.post('/routes', { slug: slug() });
    expect(missing.body.error?.message).toContain('targets');
    const ghost = await client.post('/routes', { slug: slug(), targets: [{ connection_id: 'conn_nope', model: 'x' }] });
    expect([ghost.status, ghost.body.error?.message]).toEqual([400, expect.stringContaining('conn_nope')]);
    const other = await createTenant(fixture.database.db);
    const theirs = await manageClient(fixture.api.url, other.token).post<{ id: string }>('/provider_connections', { kind: 'openai', name: 'theirs', secret: 'sk' });
    const foreign = await client.post('/routes', { slug: slug(), targets: [{ connection_id: theirs.body.id, model: 'x' }] });
    expect(foreign.status).toBe(400);
    const inRule = await client.post('/routes', { slug: slug(), targets: [target()], rules: [{ name: 'r', conditions: {}, targets: [{ connection_id: 'conn_nope', model: 'x' }] }] });
    expect(inRule.status).toBe(400);

    const r = await client.post<Route>('/routes', { slug: slug(), targets: [target('a'), target('b')] });
    const patched = await client.patch<Route>(`/routes/${r.body.id}`, { targets: [{ ...target('c'), enabled: false }] }, '"1"');
    expect(patched.body.targets).toEqual([{ connection_id: connectionId, model: 'c', enabled: false }]);
  });

  it('keeps slugs unique and immutable, bounds max_retries, timeout_ms and names', async () => {
    const s = slug();
    expect((await client.post('/routes', { slug: s, targets: [target()] })).status).toBe(201);
    const dup = await client.post('/routes', { slug: s, targets: [target()] });
    expect([dup.status, dup.body.error?.message]).toEqual([400, expect.stringContaining('slug')]);
    const r = await client.post<Route>('/routes', { slug: slug(), targets: [target()] });
    expect((await client.patch(`/routes/${r.body.id}`, { slug: 'renamed' }, '"1"')).status).toBe(400);
    for (const bad of [{ max_retries: -1 }, { max_retries: 4 }, { timeout_ms: 999 }, { timeout_ms: 600_001 }, { name: 'n'.repeat(81) }, { description: 'd'.repeat(501) }, { strategy: 'random' }]) {
      const res = await client.post('/routes', { slug: slug(), targets: [target()], ...bad });
      expect([Object.keys(bad)[0], res.status]).toEqual([Object.keys(bad)[0], 400]);
      expect(res.body.error?.message).toContain(Object.keys(bad)[0]);
    }
    expect((await client.post('/routes', { slug: 's'.repeat(65), targets: [target()] })).status).toBe(400);
    expect((await client.post('/routes', { slug: 'has space', targets: [target()] })).status).toBe(400);
  });

  it('takes environments like a connection does', async () => {
    const r = await client.post<Route>('/routes', { slug: slug(), targets: [target()], environment: 'production' });
    expect(r.body).toMatchObject({ environments: ['production'], environment: 'production' });
    const clash = await client.post('/routes', { slug: slug(), targets: [target()], environments: ['staging'], environment: 'production' });
    expect(clash.status).toBe(400);
  });
});
