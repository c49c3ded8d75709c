import { eq } from 'drizzle-orm';
import { appendAudit } from '../../core/audit';
import type { MemberRole } from '../../core/db/schema';
import { gatewayKeys, providerConnections } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { addMember } from '../../core/tenancy/organizations';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { startTestApi, type TestApi } from '../helpers/harness';
import { manageClient } from '../helpers/manage-client';
import { startTestMcpServer, type TestMcpServer } from '../helpers/mcp-servers';
import { createTenant, type Tenant } from '../helpers/tenants';

const hello = [{ role: 'user', content: 'Say hello' }];
type Manage = ReturnType<typeof manageClient>;

/**
 * Issue 20, management side: what a project-restricted token may give or read stays inside its
 * projects (items 6 and 14), a provider credential goes only where it was given for (item 9),
 * and every refusal the spec names a code for carries it (item 5).
 */
describe('management isolation (issue 20)', () => {
  let f: ChatFixture;
  let strictApi: TestApi;
  let mcp: TestMcpServer;
  let seq = 0;
  const unique = (p: string) => `${p}${Date.now().toString(36)}${seq++}`;

  /** A management token of the tenant's organization, made by a member of `role` (the owner when absent). */
  async function token(tenant: Tenant, options: { scopes: string[]; projectIds?: string[]; role?: MemberRole; api?: TestApi }): Promise<Manage> {
    const memberId = options.role ? await addMember(f.database.db, tenant.orgId, `${unique('m')}@example.com`, options.role) : tenant.memberId;
    const issued = await issueManagementToken(f.database.db, { orgId: tenant.orgId, name: unique('tok'), scopes: options.scopes, projectIds: options.projectIds, createdByMemberId: memberId });
    return manageClient((options.api ?? f.api).url, issued.token);
  }

  beforeAll(async () => {
    f = await startChatFixture();
    strictApi = await startTestApi({ env: { GW_ALLOW_PRIVATE_NETWORK: 'false' } });
    mcp = await startTestMcpServer('streamable_http', [{ name: 'search', description: 'Search the wiki', readOnly: true }]);
  });
  afterAll(async () => {
    await mcp?.close();
    await strictApi?.close();
    await f?.close();
  });

  describe('item 5: refusals carry the spec code the field names', () => {
    const register = (body: Record<string, unknown>) => f.client.post<Loose>('/mcp_servers', { slug: unique('s').slice(0, 12), name: 'x', url: mcp.url, ...body });
    const codeOf = (res: { status: number; body: Loose }) => [res.status, res.body.error?.code];

    it('tool-gateway credentials: too many headers or any malformed shape is invalid_mcp_credential, on create and on replacement', async () => {
      const nine = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`x-h${i}`, 'v']));
      const malformed = [
        { type: 'headers', headers: nine },
        { type: 'headers', headers: { 'x-api-key': 123 } },
        { type: 'headers', headers: [{ name: 'x-api-key', value: 'v' }] },
        { type: 'bearer', token: 'abc' },
        'abc',
      ];
      for (const credential of malformed) expect([credential, ...codeOf(await register({ credential }))]).toEqual([credential, 400, 'invalid_mcp_credential']);

      const server = await register({});
      expect(server.status).toBe(201);
      for (const credential of malformed) {
        const res = await f.client.post<Loose>(`/mcp_servers/${server.body.id}/credential`, { credential });
        expect([credential, ...codeOf(res)]).toEqual([credential, 400, 'invalid_mcp_credential']);
      }
    });

    it('tool-gateway URLs and hashes: invalid_mcp_server_url and mcp_tool_definition_stale', async () => {
      for (const url of ['', 42, 'x'.repeat(3000)]) expect([url, ...codeOf(await register({ url }))]).toEqual([url, 400, 'invalid_mcp_server_url']);
      const server = await register({});
      expect(server.status).toBe(201);
      expect(codeOf(await f.client.patch<Loose>(`/mcp_servers/${server.body.id}`, { url: '' }, `"${server.body.version}"`))).toEqual([400, 'invalid_mcp_server_url']);
      const tools = await f.client.get<{ data: Loose[] }>('/mcp_server_tools?limit=100');
      const tool = tools.body.data.find((t) => t.server_id === server.body.id)!;
      for (const expected_sha256 of ['abc', tool.definition_sha256.toUpperCase(), 7]) {
        const res = await f.client.post<Loose>(`/mcp_server_tools/${tool.id}/approve`, { access_class: 'read', expected_sha256 });
        expect([expected_sha256, ...codeOf(res)]).toEqual([expected_sha256, 400, 'mcp_tool_definition_stale']);
      }
    });

    it('grants: a tool the server stopped listing is mcp_tool_removed, as on approve', async () => {
      const upstream = await startTestMcpServer('streamable_http', [{ name: 'lookup', description: 'Look up', readOnly: true }, { name: 'other', description: 'Other', readOnly: true }]);
      try {
        const server = await register({ url: upstream.url });
        expect(server.status).toBe(201);
        const tools = await f.client.get<{ data: Loose[] }>('/mcp_server_tools?limit=100');
        const lookup = tools.body.data.find((t) => t.server_id === server.body.id && t.upstream_name === 'lookup')!;
        expect((await f.client.post(`/mcp_server_tools/${lookup.id}/approve`, { access_class: 'read', expected_sha256: lookup.definition_sha256 })).status).toBe(200);
        upstream.tools.splice(0, 1);
        expect((await f.client.post(`/mcp_servers/${server.body.id}/sync`, {})).status).toBe(200);
        const grant = await f.client.post<Loose>('/mcp_key_grants', { key_id: f.tenant.key.id, server_id: server.body.id, mode: 'selected', tools: ['lookup'] });
        expect(codeOf(grant)).toEqual([400, 'mcp_tool_removed']);
      } finally {
        await upstream.close();
      }
    });

    it('provider ids: unknown_provider for a kind, an allowed provider or a price\'s provider that cannot be one; a missing field stays a plain 400', async () => {
      for (const kind of ['x'.repeat(65), 42, '']) {
        expect([kind, ...codeOf(await f.client.post<Loose>('/provider_connections', { kind, name: unique('c'), secret: 'sk-x' }))]).toEqual([kind, 400, 'unknown_provider']);
      }
      expect(codeOf(await f.client.post<Loose>('/provider_connections', { name: unique('c'), secret: 'sk-x' }))).toEqual([400, null]);
      for (const allowed_providers of [[''], [42], ['openai', 'x'.repeat(100)]]) {
        const res = await f.client.post<Loose>('/gateway_keys', { label: 'k', project_id: f.tenant.projectId, allowed_providers });
        expect([allowed_providers, ...codeOf(res)]).toEqual([allowed_providers, 400, 'unknown_provider']);
      }
      const key = await f.client.get<Loose>(`/gateway_keys/${f.tenant.key.id}`);
      expect(codeOf(await f.client.patch<Loose>(`/gateway_keys/${f.tenant.key.id}`, { allowed_providers: [''] }, key.etag!))).toEqual([400, 'unknown_provider']);
      expect(codeOf(await f.client.post<Loose>('/model_prices', { model: 'openai/gpt-4o', provider: '', input_per_million: 1 }))).toEqual([400, 'unknown_provider']);
    });
  });

  describe('item 6: a project-restricted token gives a key at most its own reach', () => {
    let member: Manage;
    let admin: Manage;
    const project = () => f.tenant.projectId;
    const keysInDb = async () => (await f.database.db.select({ id: gatewayKeys.id }).from(gatewayKeys).where(eq(gatewayKeys.orgId, f.tenant.orgId))).length;

    beforeAll(async () => {
      member = await token(f.tenant, { scopes: ['keys:read', 'keys:write'], projectIds: [project()], role: 'member' });
      admin = await token(f.tenant, { scopes: ['keys:read', 'keys:write'], projectIds: [project()], role: 'admin' });
    });

    it('refuses creating a key in its own project with organization observability or (creator not admin) payload access', async () => {
      const before = await keysInDb();
      for (const [client, body] of [
        [member, { observability_access: 'organization' }],
        [member, { payload_access: true }],
        [member, { observability_access: 'organization', payload_access: true }],
        [admin, { observability_access: 'organization' }],
      ] as const) {
        const res = await client.post<Loose>('/gateway_keys', { label: unique('k'), project_id: project(), ...body });
        expect([body, res.status, res.body.error?.code]).toEqual([body, 403, 'project_restricted']);
      }
      expect(await keysInDb()).toBe(before);
      // Its own reach is fine: none or scoped; payload access when its creator is an owner or admin.
      expect((await member.post('/gateway_keys', { label: unique('k'), project_id: project(), observability_access: 'scoped' })).status).toBe(201);
      expect((await admin.post<Loose>('/gateway_keys', { label: unique('k'), project_id: project(), observability_access: 'scoped', payload_access: true })).body).toMatchObject({ payload_access: true, observability_access: 'scoped' });
    });

    it('refuses widening a key by patch, leaving it unchanged; fields it does not widen still change', async () => {
      const made = await member.post<Loose>('/gateway_keys', { label: unique('k'), project_id: project(), observability_access: 'scoped' });
      const id = made.body.id as string;
      for (const body of [{ observability_access: 'organization' }, { payload_access: true }, { label: 'wider', observability_access: 'organization' }]) {
        const res = await member.patch<Loose>(`/gateway_keys/${id}`, body, made.etag!);
        expect([body, res.status, res.body.error?.code]).toEqual([body, 403, 'project_restricted']);
      }
      const after = await member.get<Loose>(`/gateway_keys/${id}`);
      expect(after.body).toMatchObject({ version: made.body.version, observability_access: 'scoped', payload_access: false, label: made.body.label });
      const renamed = await member.patch<Loose>(`/gateway_keys/${id}`, { label: 'renamed', observability_access: 'none' }, made.etag!);
      expect([renamed.status, renamed.body.observability_access]).toEqual([200, 'none']);
    });

    it('cannot be handed the secret of a wider key by rotating it, nor widen one an admin made; an unrestricted admin token still can', async () => {
      const wide = await f.client.post<Loose>('/gateway_keys', { label: unique('wide'), project_id: project(), observability_access: 'organization', payload_access: true });
      expect([wide.status, wide.body.observability_access, wide.body.payload_access]).toEqual([201, 'organization', true]);
      const rotate = await member.post<Loose>(`/gateway_keys/${wide.body.id}/rotate`, { overlap_seconds: 0 });
      expect([rotate.status, rotate.body.error?.code, rotate.body.secret]).toEqual([403, 'project_restricted', undefined]);
      // Re-sending what the key already has is no widening.
      const relabel = await member.patch<Loose>(`/gateway_keys/${wide.body.id}`, { label: 'kept wide', observability_access: 'organization', payload_access: true }, wide.etag!);
      expect([relabel.status, relabel.body.label]).toEqual([200, 'kept wide']);

      const narrow = await f.client.post<Loose>('/gateway_keys', { label: unique('n'), project_id: project() });
      const widened = await f.client.patch<Loose>(`/gateway_keys/${narrow.body.id}`, { observability_access: 'organization', payload_access: true }, narrow.etag!);
      expect([widened.status, widened.body.observability_access, widened.body.payload_access]).toEqual([200, 'organization', true]);
      const scoped = await member.post<Loose>('/gateway_keys', { label: unique('k'), project_id: project(), observability_access: 'scoped' });
      expect((await member.post<Loose>(`/gateway_keys/${scoped.body.id}/rotate`, { overlap_seconds: 0 })).status).toBe(200);
    });
  });

  describe('item 9: a provider credential goes only to the hosts it was given for', () => {
    it('a kind with a fixed provider host takes config.base_url only on the provider\'s domains (alternate-host rule and codes)', async () => {
      const strict = manageClient(strictApi.url, f.tenant.token);
      const create = (kind: string, base_url: string) => strict.post<Loose>('/provider_connections', { kind, name: unique('c'), secret: 'sk-live-x', config: { base_url } });
      expect([(await create('openai', 'https://evil.example.com/v1')).body.error?.code]).toEqual(['alternate_host_off_domain']);
      expect([(await create('openai', 'https://api.openai.com.evil.example/v1')).body.error?.code]).toEqual(['alternate_host_off_domain']);
      expect([(await create('groq', 'https://llm.example.net/openai/v1')).body.error?.code]).toEqual(['alternate_host_not_allowed']);
      expect((await create('groq', 'https://api.groq.com/openai/v1')).status).toBe(201);

      const conn = await strict.post<Loose>('/provider_connections', { kind: 'openai', name: unique('c'), secret: 'sk-live-x' });
      const moved = await strict.patch<Loose>(`/provider_connections/${conn.body.id}`, { config: { base_url: 'https://collector.example.net/v1' } }, conn.etag!);
      expect([moved.status, moved.body.error?.code]).toEqual([400, 'alternate_host_off_domain']);
      const unchanged = await strict.get<Loose>(`/provider_connections/${conn.body.id}`);
      expect(unchanged.body).toMatchObject({ version: 1, base_url: 'https://api.openai.com/v1', has_credential: true });
      const regional = await strict.patch<Loose>(`/provider_connections/${conn.body.id}`, { config: { base_url: 'https://us.api.openai.com/v1' } }, conn.etag!);
      expect([regional.status, regional.body.base_url, regional.body.has_credential]).toEqual([200, 'https://us.api.openai.com/v1', true]);
    });

    it('a kind whose URL the customer types loses its credential and fallbacks on a new host; the connection then serves nothing until given one', async () => {
      const key = await f.key();
      const served = `${f.sandbox.url}/openai/v1`;
      const conn = await f.client.post<Loose>('/provider_connections', {
        kind: 'custom', name: unique('house'), secret: 'sk-sandbox-first', fallback_secrets: ['sk-sandbox-spare'],
        config: { base_url: served }, model_map: { 'house-chat': 'gpt-4o-mini' },
      });
      expect(conn.status).toBe(201);
      const id = conn.body.id as string;
      await f.settle();
      expect((await f.chat(key, { model: 'custom/house-chat', messages: hello })).status).toBe(200);

      // Same host, another path: the credential stays.
      const samePlace = await f.client.patch<Loose>(`/provider_connections/${id}`, { config: { base_url: `${served}/` } }, '"1"');
      expect([samePlace.status, samePlace.body.has_credential, samePlace.body.fallback_secret_count]).toEqual([200, true, 1]);

      // Another host (the same sandbox under another name, so a kept key would still be accepted there).
      const elsewhere = served.replace('127.0.0.1', 'localhost');
      const moved = await f.client.patch<Loose>(`/provider_connections/${id}`, { config: { base_url: elsewhere } }, '"2"');
      expect([moved.status, moved.body.has_credential, moved.body.fallback_secret_count]).toEqual([200, false, 0]);
      const [row] = await f.database.db.select().from(providerConnections).where(eq(providerConnections.id, id));
      expect([row!.secretSealed, row!.fallbackSecretsSealed]).toEqual([null, null]);
      await f.settle();
      const refused = await f.chat(key, { model: 'custom/house-chat', messages: hello });
      expect([refused.status, refused.json.error?.type, refused.json.error?.code]).toEqual([503, 'no_available_provider', 'connection_out_of_scope']);

      // A credential given for the new host: served again.
      const given = await f.client.post<Loose>(`/provider_connections/${id}/credential`, { secret: 'sk-sandbox-second' });
      expect([given.status, given.body.has_credential]).toEqual([200, true]);
      await f.settle();
      expect((await f.chat(key, { model: 'custom/house-chat', messages: hello })).status).toBe(200);

      // An alternate on a new host clears it too; dropping alternates adds no host and keeps it.
      const alternate = await f.client.patch<Loose>(`/provider_connections/${id}`, { alternate_base_urls: ['https://backup.example.net/v1'] }, `"${given.body.version}"`);
      expect([alternate.status, alternate.body.has_credential]).toEqual([200, false]);
      const again = await f.client.post<Loose>(`/provider_connections/${id}/credential`, { secret: 'sk-sandbox-third' });
      const dropped = await f.client.patch<Loose>(`/provider_connections/${id}`, { alternate_base_urls: [] }, `"${again.body.version}"`);
      expect([dropped.status, dropped.body.has_credential]).toEqual([200, true]);
    });
  });

  describe('issue 33 item 5: a fixed-host kind repointed inside a private network keeps no credential', () => {
    it('an openai connection moved to another private host loses its credential and sends none there', async () => {
      const key = await f.key();
      const conn = await f.client.post<Loose>('/provider_connections', { kind: 'openai', name: unique('self-hosted'), secret: 'sk-sandbox-private', config: { base_url: `${f.sandbox.url}/openai/v1` } });
      expect(conn.status).toBe(201);
      const id = conn.body.id as string;
      // The same sandbox under another private name: a kept key would be sent there and accepted.
      const elsewhere = `${f.sandbox.url.replace('127.0.0.1', 'localhost')}/openai/v1`;
      const moved = await f.client.patch<Loose>(`/provider_connections/${id}`, { config: { base_url: elsewhere } }, conn.etag!);
      expect([moved.status, moved.body.has_credential]).toEqual([200, false]);
      await f.settle();
      const before = f.sandbox.received.length;
      await f.chat(key, { model: 'openai/gpt-4o-mini', messages: hello });
      expect(f.sandbox.received.slice(before).filter((r) => JSON.stringify(r.headers ?? {}).includes('sk-sandbox-private'))).toEqual([]);
      const given = await f.client.post<Loose>(`/provider_connections/${id}/credential`, { secret: 'sk-sandbox-private-2' });
      expect([given.status, given.body.has_credential]).toEqual([200, true]);
      await f.client.delete(`/provider_connections/${id}`, `"${given.body.version}"`);
    });
  });

  describe('item 14: audit events and budget status of a restricted token stay in its projects', () => {
    let t: Tenant;
    let owner: Manage;
    let second: string;

    beforeAll(async () => {
      t = await createTenant(f.database.db);
      owner = manageClient(f.api.url, t.token);
      const made = await owner.post<Loose>('/projects', { name: 'Second' });
      expect(made.status).toBe(201);
      second = made.body.id;
    });

    it('audit_events: only writes that concern its projects; organization-level writes are not its to read', async () => {
      const mine = await owner.post<Loose>('/gateway_keys', { label: 'mine', project_id: t.projectId });
      const theirs = await owner.post<Loose>('/gateway_keys', { label: 'theirs', project_id: second });
      expect((await owner.patch(`/projects/${second}`, { name: 'Second renamed' }, '"1"')).status).toBe(200);
      expect((await owner.post('/end_user_cap_rules', { project_id: t.projectId, amount: '3', period: 'daily', enabled: false })).status).toBe(201);
      expect((await owner.post('/end_user_cap_rules', { project_id: second, amount: '3', period: 'daily', enabled: false })).status).toBe(201);
      expect((await owner.post('/guardrail_policies', { target: `project:${second}`, enabled: false, on_engine_error: 'block', rules: [] })).status).toBe(201);
      expect((await owner.post('/provider_connections', { kind: 'openai', name: 'org level', secret: 'sk-org-level' })).status).toBe(201);
      // A write made by a workflow names only the key: its project is found from the key.
      await appendAudit(f.database.db, {
        orgId: t.orgId, actor: { tokenId: null, memberId: null }, action: 'gateway_keys.rotation_ended', resourceType: 'gateway_keys',
        resourceId: mine.body.id, beforeVersion: 1, afterVersion: 2,
      });

      const all = async (client: Manage, query = '') => {
        const seen: Loose[] = [];
        let cursor = '';
        do {
          const page = await client.get<Loose>(`/audit_events?limit=100${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
          expect(page.status).toBe(200);
          seen.push(...page.body.data);
          cursor = page.body.next_cursor;
        } while (cursor);
        return seen;
      };
      const everything = await all(owner);
      const projectOf = (resourceId: string) => everything.filter((e) => e.resource_id === resourceId).map((e) => e.project_id);
      expect(projectOf(mine.body.id)).toEqual([t.projectId, t.projectId]);
      expect(projectOf(theirs.body.id)).toEqual([second]);
      expect(everything.find((e) => e.action === 'provider_connections.create')!.project_id).toBeNull();
      expect(everything.find((e) => e.action === 'guardrail_policies.create')!.project_id).toBe(second);

      const restricted = await token(t, { scopes: ['audit:read'], projectIds: [t.projectId] });
      const seen = await all(restricted);
      expect(seen.length).toBeGreaterThanOrEqual(3);
      expect(seen.every((e) => e.project_id === t.projectId)).toBe(true);
      expect(seen.map((e) => e.action).sort()).toEqual(['end_user_cap_rules.create', 'gateway_keys.create', 'gateway_keys.rotation_ended']);
      expect(await all(restricted, `&q=${theirs.body.id}`)).toEqual([]);
      expect(await all(restricted, `&q=${second}`)).toEqual([]);
    });

    it('budget_status: end customers under the organization rule only when they spent in its projects', async () => {
      const connection = await owner.post('/provider_connections', { kind: 'openai', name: 'sandbox', secret: 'sk-sandbox-test', config: { base_url: `${f.sandbox.url}/openai/v1` } });
      expect(connection.status).toBe(201);
      const rule = await owner.post<Loose>('/end_user_cap_rules', { amount: '20', period: 'daily', behavior: 'block' });
      expect(rule.status).toBe(201);
      const put = await fetch(`${f.api.url}/manage/v1/end_user_cap_rules/${rule.body.id}/overrides/carol`, {
        method: 'PUT', headers: { authorization: `Bearer ${t.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ amount: '2' }),
      });
      expect(put.status).toBe(201);
      const keyIn = async (projectId: string) => (await owner.post<Loose>('/gateway_keys', { label: unique('k'), project_id: projectId })).body.secret as string;
      const [firstKey, secondKey] = [await keyIn(t.projectId), await keyIn(second)];
      await f.settle();
      const ask = (secret: string, user: string) => f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, max_tokens: 3, metadata: { user_id: user } });
      expect((await Promise.all([ask(firstKey, 'alice'), ask(secondKey, 'bob')])).map((a) => a.status)).toEqual([200, 200]);

      const customers = async (client: Manage) => {
        const res = await client.get<{ data: Loose[] }>('/budget_status');
        expect(res.status).toBe(200);
        return res.body.data.filter((s) => s.scope === 'end_user').map((s) => s.end_user_id as string).sort();
      };
      // The ledger rows land in batches: wait until the unrestricted reader sees both spenders.
      for (let i = 0; i < 100 && (await customers(owner)).join() !== 'alice,bob,carol'; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await customers(owner)).toEqual(['alice', 'bob', 'carol']);

      expect(await customers(await token(t, { scopes: ['budgets:read'], projectIds: [t.projectId] }))).toEqual(['alice']);
      expect(await customers(await token(t, { scopes: ['budgets:read'], projectIds: [second] }))).toEqual(['bob']);
    });
  });
});
