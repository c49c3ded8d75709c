import { eq } from 'drizzle-orm';
import { createSealer } from '../../core/crypto/sealing';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents, providerConnections } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { startSandbox, type Sandbox } from '../../sandbox/server';
import { startTestApi, type TestApi } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { expectShape } from '../helpers/resource-shapes';
import type { Tenant } from '../helpers/tenants';

type Connection = { id: string; version: number; name: string; environments: string[]; environment: string | null; base_url: string; fallback_secret_count: number; credential_updated_at: number; alternate_base_urls: string[] };

const SECRET = 'sk-live-AAAAAAAAAAAAAAAAAAAAAAAAAAAA';

describe('provider_connections', () => {
  let fixture: ManagementFixture;
  let database: DatabaseHandle;
  let tenant: Tenant;
  /** The development/test deployment: GW_ALLOW_PRIVATE_NETWORK=true, so the local sandbox is reachable. */
  let client: ReturnType<typeof manageClient>;
  /** A production-like deployment of the same API: only public HTTPS hosts. */
  let strictApi: TestApi;
  let strict: ReturnType<typeof manageClient>;
  let sandbox: Sandbox;
  let seq = 0;
  const name = (p = 'conn') => `${p} ${Date.now()} ${seq++}`;

  beforeAll(async () => {
    sandbox = await startSandbox();
    fixture = await startManagementFixture({ env: { GW_ALLOW_PRIVATE_NETWORK: 'true' } });
    ({ database, tenant, client } = fixture);
    strictApi = await startTestApi({ env: { GW_ALLOW_PRIVATE_NETWORK: 'false' } });
    strict = manageClient(strictApi.url, tenant.token);
  });
  afterAll(async () => {
    await fixture.close();
    await strictApi.close();
    await sandbox.close();
  });

  it('seals secret and fallback_secrets (AES-256-GCM bound to org and id), never returns or audits them', async () => {
    const res = await client.post<Connection>('/provider_connections', { kind: 'openai', name: name(), secret: SECRET, fallback_secrets: ['sk-live-fallback-1', 'sk-live-fallback-2'] });
    expect(res.status).toBe(201);
    expect(res.body.fallback_secret_count).toBe(2);
    expectShape('provider_connections', res.body);
    const everything = JSON.stringify([res.body, (await client.get(`/provider_connections/${res.body.id}`)).body, (await client.get('/provider_connections')).body]);
    expect(everything).not.toContain(SECRET);
    expect(everything).not.toContain('fallback-1');

    const [row] = await database.db.select().from(providerConnections).where(eq(providerConnections.id, res.body.id));
    expect(row!.secretSealed).not.toContain(SECRET);
    expect(row!.secretSealed).toMatch(/^v\d+\./);
    const sealer = createSealer(process.env.GW_SEALING_KEYS!);
    expect(sealer.open(row!.secretSealed!, { orgId: tenant.orgId, recordId: res.body.id, field: 'secret' })).toBe(SECRET);
    expect(JSON.parse(sealer.open(row!.fallbackSecretsSealed!, { orgId: tenant.orgId, recordId: res.body.id, field: 'fallback_secrets' }))).toEqual(['sk-live-fallback-1', 'sk-live-fallback-2']);
    // Bound to its record: the same ciphertext does not open as another connection's.
    expect(() => sealer.open(row!.secretSealed!, { orgId: tenant.orgId, recordId: 'conn_other', field: 'secret' })).toThrow();
    const audit = await database.db.select().from(auditEvents).where(eq(auditEvents.resourceId, res.body.id));
    expect(JSON.stringify(audit)).not.toContain(SECRET);
  });

  it('keeps names unique per kind, ignoring case and repeated spaces (400 duplicate_connection_name), even when racing', async () => {
    const base = name('Prod  Key');
    expect((await client.post('/provider_connections', { kind: 'openai', name: base, secret: SECRET })).status).toBe(201);
    const clash = await client.post('/provider_connections', { kind: 'openai', name: `  ${base.toUpperCase().replace(/ +/g, '   ')} `, secret: SECRET });
    expect([clash.status, clash.body.error?.code]).toEqual([400, 'duplicate_connection_name']);
    expect((await client.post('/provider_connections', { kind: 'anthropic', name: base, secret: SECRET })).status).toBe(201);

    const racing = name('race');
    const answers = await Promise.all(Array.from({ length: 8 }, () => client.post('/provider_connections', { kind: 'mistral', name: racing, secret: SECRET })));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.body.error?.code === 'duplicate_connection_name')).toHaveLength(7);

    const other = await client.post<Connection>('/provider_connections', { kind: 'openai', name: name('other'), secret: SECRET });
    const renamed = await client.patch(`/provider_connections/${other.body.id}`, { name: base.toLowerCase() }, '"1"');
    expect([renamed.status, renamed.body.error?.code]).toEqual([400, 'duplicate_connection_name']);
  });

  it('frees the name of a deleted connection', async () => {
    const n = name('reuse');
    const first = await client.post<Connection>('/provider_connections', { kind: 'groq', name: n, secret: SECRET });
    await client.delete(`/provider_connections/${first.body.id}`, '"1"');
    expect((await client.post('/provider_connections', { kind: 'groq', name: n, secret: SECRET })).status).toBe(201);
  });

  it('applies the environments / environment rules of spec 2.6', async () => {
    const create = (extra: object) => client.post<Connection>('/provider_connections', { kind: 'openai', name: name(), secret: SECRET, ...extra });
    expect((await create({})).body).toMatchObject({ environments: [], environment: null });
    expect((await create({ environment: 'staging' })).body).toMatchObject({ environments: ['staging'], environment: 'staging' });
    expect((await create({ environment: null })).body).toMatchObject({ environments: [], environment: null });
    expect((await create({ environments: ['production', 'staging'] })).body).toMatchObject({ environments: ['production', 'staging'], environment: 'production' });
    expect((await create({ environments: ['production', 'staging'], environment: 'production' })).status).toBe(201);
    const mismatch = await create({ environments: ['production', 'staging'], environment: 'staging' });
    expect([mismatch.status, mismatch.body.error?.type]).toEqual([400, 'invalid_request_error']);
    expect(mismatch.body.error?.message).toContain('environment');
    const unknown = await create({ environments: ['moon'] });
    expect(unknown.status).toBe(400);

    const c = await create({ environments: ['development'] });
    const patched = await client.patch<Connection>(`/provider_connections/${c.body.id}`, { environment: 'staging' }, '"1"');
    expect(patched.body).toMatchObject({ environments: ['staging'], environment: 'staging' });
    const cleared = await client.patch<Connection>(`/provider_connections/${c.body.id}`, { environments: null }, '"2"');
    expect(cleared.body).toMatchObject({ environments: [], environment: null });
  });

  it('bounds timeout_ms to 1000..600000 and refuses unknown kinds with unknown_provider', async () => {
    for (const timeout_ms of [999, 600_001]) {
      const res = await client.post('/provider_connections', { kind: 'openai', name: name(), secret: SECRET, timeout_ms });
      expect(res.status).toBe(400);
      expect(res.body.error?.message).toContain('timeout_ms');
    }
    expect((await client.post('/provider_connections', { kind: 'openai', name: name(), secret: SECRET, timeout_ms: 600_000 })).status).toBe(201);
    const kind = await client.post('/provider_connections', { kind: 'skynet', name: name(), secret: SECRET });
    expect([kind.status, kind.body.error?.code]).toEqual([400, 'unknown_provider']);
  });

  it('checks alternate_base_urls against the kind: listed domains, none, or any public HTTPS host', async () => {
    const make = (kind: string, urls: string[], extra: object = {}) =>
      client.post<Connection>('/provider_connections', { kind, name: name(), secret: SECRET, alternate_base_urls: urls, ...extra });
    expect((await make('openai', ['https://us.api.openai.com/v1'])).status).toBe(201);
    const off = await make('openai', ['https://api.openai.com.evil.example/v1']);
    expect([off.status, off.body.error?.code]).toEqual([400, 'alternate_host_off_domain']);
    const none = await make('groq', ['https://api.groq.com/openai/v1']);
    expect([none.status, none.body.error?.code]).toEqual([400, 'alternate_host_not_allowed']);
    const typed = await make('custom', ['https://backup.example.net/v1'], { config: { base_url: 'https://llm.example.net/v1' } });
    expect(typed.status).toBe(201);
    const plain = await strict.post('/provider_connections', { kind: 'custom', name: name(), secret: SECRET, config: { base_url: 'https://llm.example.net/v1' }, alternate_base_urls: ['http://backup.example.net/v1'] });
    expect(plain.status).toBe(400);
    const six = await make('custom', Array.from({ length: 6 }, (_, i) => `https://b${i}.example.net`), { config: { base_url: 'https://llm.example.net/v1' } });
    expect(six.status).toBe(400);
    expect(six.body.error?.message).toContain('alternate_base_urls');

    const patched = await client.patch<Connection>(`/provider_connections/${typed.body.id}`, { alternate_base_urls: [] }, '"1"');
    expect(patched.body.alternate_base_urls).toEqual([]);
  });

  it('takes config.base_url only as HTTPS to a public host unless the deployment allows private networks', async () => {
    const withBase = (c: ReturnType<typeof manageClient>, base_url: string) =>
      c.post<Connection>('/provider_connections', { kind: 'openai', name: name(), secret: SECRET, config: { base_url } });
    for (const url of ['http://api.example.com/v1', 'https://127.0.0.1/v1', 'https://10.1.2.3/v1', 'https://localhost/v1', 'https://[::1]/v1', 'https://user:pw@api.example.com/v1']) {
      const res = await withBase(strict, url);
      expect([url, res.status]).toEqual([url, 400]);
      expect(res.body.error?.message).toContain('config.base_url');
    }
    // A host the provider owns (issue 20: a fixed-host kind's credential goes nowhere else; see manage-isolation.test.ts).
    expect((await withBase(strict, 'https://eu.api.openai.com/v1')).body.base_url).toBe('https://eu.api.openai.com/v1');
    expect((await withBase(client, `${sandbox.url}/openai/v1`)).status).toBe(201);
    const required = await client.post('/provider_connections', { kind: 'azure_openai', name: name(), secret: SECRET });
    expect(required.status).toBe(400);
    expect(required.body.error?.message).toContain('config.base_url');
  });

  it('with validate: true checks the credential with the provider before storing anything', async () => {
    const good = await client.post<Connection>('/provider_connections', { kind: 'openai', name: name(), secret: 'sk-sandbox-good', validate: true, config: { base_url: `${sandbox.url}/openai/v1` } });
    expect(good.status).toBe(201);
    const anthropic = await client.post('/provider_connections', { kind: 'anthropic', name: name(), secret: 'sk-sandbox-a', validate: true, config: { base_url: `${sandbox.url}/anthropic/v1` } });
    expect(anthropic.status).toBe(201);
    const gemini = await client.post('/provider_connections', { kind: 'google', name: name(), secret: 'wrong', validate: true, config: { base_url: `${sandbox.url}/google/v1beta` } });
    expect([gemini.status, gemini.body.error?.code]).toEqual([400, 'credential_rejected']);

    const before = (await client.get<{ data: unknown[] }>('/provider_connections')).body.data.length;
    const bad = await client.post('/provider_connections', { kind: 'openai', name: name(), secret: 'sk-wrong', validate: true, config: { base_url: `${sandbox.url}/openai/v1` } });
    expect([bad.status, bad.body.error?.code]).toEqual([400, 'credential_rejected']);
    expect(bad.body.error?.message).not.toContain('sk-wrong');
    const down = await client.post('/provider_connections', { kind: 'openai', name: name(), secret: 'sk-sandbox-x', validate: true, config: { base_url: 'http://127.0.0.1:1/v1' } });
    expect([down.status, down.body.error?.type]).toEqual([502, 'upstream_error']);
    expect((await client.get<{ data: unknown[] }>('/provider_connections')).body.data.length).toBe(before);
  });

  it('replaces the credential with POST /{id}/credential (optionally validated), moving the version', async () => {
    const c = await client.post<Connection>('/provider_connections', { kind: 'openai', name: name(), secret: 'sk-sandbox-old', config: { base_url: `${sandbox.url}/openai/v1` } });
    const rejected = await client.post(`/provider_connections/${c.body.id}/credential`, { secret: 'nope', validate: true });
    expect([rejected.status, rejected.body.error?.code]).toEqual([400, 'credential_rejected']);
    const stale = await client.post(`/provider_connections/${c.body.id}/credential`, { secret: 'sk-sandbox-new' }, { 'if-match': '"5"' });
    expect(stale.status).toBe(409);
    const replaced = await client.post<Connection>(`/provider_connections/${c.body.id}/credential`, { secret: 'sk-sandbox-new', validate: true, fallback_secrets: ['sk-sandbox-spare'] });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ id: c.body.id, version: 2, fallback_secret_count: 1 });
    expect(JSON.stringify(replaced.body)).not.toContain('sk-sandbox-new');
    expectShape('provider_connections', replaced.body);
    const [row] = await database.db.select().from(providerConnections).where(eq(providerConnections.id, c.body.id));
    expect(createSealer(process.env.GW_SEALING_KEYS!).open(row!.secretSealed!, { orgId: tenant.orgId, recordId: c.body.id, field: 'secret' })).toBe('sk-sandbox-new');
    const audit = await database.db.select().from(auditEvents).where(eq(auditEvents.resourceId, c.body.id));
    expect(audit.map((a) => a.action)).toContain('provider_connections.credential');
    expect(JSON.stringify(audit)).not.toContain('sk-sandbox');
  });

  it('checks a replacement credential before locking the connection: a patch meanwhile is not held up, and wins', async () => {
    const c = await client.post<Connection>('/provider_connections', { kind: 'openai', name: name(), secret: 'sk-sandbox-old', config: { base_url: `${sandbox.url}/x/delay_ms=1500/openai/v1` } });
    const order: string[] = [];
    const replacing = client.post(`/provider_connections/${c.body.id}/credential`, { secret: 'sk-sandbox-new', validate: true }).then((r) => (order.push('credential'), r));
    await new Promise((r) => setTimeout(r, 300));
    const renamed = await client.patch<Connection>(`/provider_connections/${c.body.id}`, { name: name('renamed') }, '"1"');
    order.push('patch');
    expect([renamed.status, renamed.body.version]).toEqual([200, 2]);
    const replaced = await replacing;
    // The row changed while the provider was asked: the replacement is refused, nothing half-written.
    expect([replaced.status, replaced.body.error?.code, replaced.etag]).toEqual([409, 'version_conflict', '"2"']);
    expect(order).toEqual(['patch', 'credential']);
    const [row] = await database.db.select().from(providerConnections).where(eq(providerConnections.id, c.body.id));
    expect(createSealer(process.env.GW_SEALING_KEYS!).open(row!.secretSealed!, { orgId: tenant.orgId, recordId: c.body.id, field: 'secret' })).toBe('sk-sandbox-old');
  });

  it('never accepts a secret on patch; status toggles enabled/disabled', async () => {
    const c = await client.post<Connection>('/provider_connections', { kind: 'openai', name: name(), secret: SECRET });
    const withSecret = await client.patch(`/provider_connections/${c.body.id}`, { secret: 'sk-new' }, '"1"');
    expect(withSecret.status).toBe(400);
    const off = await client.patch(`/provider_connections/${c.body.id}`, { status: 'disabled', pool_role: 'standby' }, '"1"');
    expect(off.body).toMatchObject({ status: 'disabled', pool_role: 'standby', version: 2 });
    expect((await client.patch(`/provider_connections/${c.body.id}`, { status: 'paused' }, '"2"')).status).toBe(400);
  });

  it('serves the provider kinds at /manage/v1/provider_kinds and /console/providers/kinds', async () => {
    const manage = await client.get<{ data: Array<{ id: string; alternate_hosts: { allowed: boolean } }> }>('/provider_kinds');
    expect(manage.status).toBe(200);
    expect(manage.body.data.map((k) => k.id)).toEqual(expect.arrayContaining(['openai', 'anthropic', 'google', 'azure_openai', 'custom']));
    expect(manage.body.data.find((k) => k.id === 'groq')?.alternate_hosts.allowed).toBe(false);
    const consolePath = await fetch(`${fixture.api.url}/console/providers/kinds`);
    expect(await consolePath.json()).toEqual(manage.body);
    const narrow = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'n', scopes: ['projects:read'], createdByMemberId: tenant.memberId });
    expect((await manageClient(fixture.api.url, narrow.token).get('/provider_kinds')).status).toBe(200);
    expect((await fetch(`${fixture.api.url}/manage/v1/provider_kinds`)).status).toBe(401);
  });
});
