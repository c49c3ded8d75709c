import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Payload } from '@temporalio/common';
import { defaultPayloadConverter } from '@temporalio/common';
import { eq } from 'drizzle-orm';
import { SEALED_PAYLOAD_ENCODING, sealingPayloadCodec } from '../../core/crypto/payload-codec';
import { createSealer, newKeyring } from '../../core/crypto/sealing';
import { sha256Hex } from '../../core/crypto/secrets';
import { managementTokens } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';
import { startTestApi, uniquePrefix } from '../helpers/harness';
import { createTenant } from '../helpers/tenants';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';

type WirePayload = { metadata: Record<string, string>; data: string };
const UI = 'http://localhost:8233';
const wire = (p: Payload): WirePayload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v!).toString('base64')])),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});
const encodingOf = (p: { metadata?: Record<string, Uint8Array | null> | null }) => Buffer.from(p.metadata?.encoding ?? new Uint8Array()).toString();

/**
 * Issue 34: workflow and activity payloads are sealed with the gateway's sealing keys, so a
 * prompt is not readable in Temporal's history, and the API serves Temporal's codec server
 * protocol (`/temporal-codec/decode`, `/encode`) for the operator: to the Temporal CLI with a
 * bearer token and to the Temporal UI with a session cookie, across origins from the UI only.
 */
describe('sealed Temporal payloads and the codec endpoint', () => {
  let f: ManagementFixture;
  const prefix = uniquePrefix('codec');
  const prompt = `a secret prompt ${prefix}`;
  let workflowId: string;

  beforeAll(async () => {
    f = await startManagementFixture({ operator: true, env: { GW_TEMPORAL_UI_URL: UI } });
    // The API's own client starts a workflow (as POST /v1/videos does) on a queue no worker serves.
    workflowId = `${prefix}job`;
    await f.api.runtime.temporal.workflow.start('videoJob', { taskQueue: `${prefix}nowhere`, workflowId, args: [{ jobId: workflowId, job: { request: { prompt } } }] });
  });
  afterAll(async () => {
    await f.api.runtime.temporal.workflow.getHandle(workflowId).terminate('test over').catch(() => undefined);
    await f?.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${f.api.url}/temporal-codec${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  async function startedInput(): Promise<Payload[]> {
    const history = await f.api.runtime.temporal.workflow.getHandle(workflowId).fetchHistory();
    return (history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads ?? []) as Payload[];
  }

  it('keeps the prompt out of the history: the input is sealed', async () => {
    const input = await startedInput();
    expect(input).toHaveLength(1);
    expect(encodingOf(input[0]!)).toBe(SEALED_PAYLOAD_ENCODING);
    expect(Buffer.from(input[0]!.data!).toString()).not.toContain('secret prompt');
    // The gateway's own client reads it back.
    const described = await f.api.runtime.temporal.workflow.getHandle(workflowId).describe();
    expect(described.status.name).toBe('RUNNING');
  });

  it('decodes for the operator, and for no one else', async () => {
    const [sealed] = await startedInput();
    const body = { payloads: [wire(sealed!)] };
    expect((await post('/decode', body)).status).toBe(401);
    const other = await createTenant(f.database.db);
    const refused = await post('/decode', body, { authorization: `Bearer ${other.token}` });
    expect([refused.status, ((await refused.json()) as { error: { type: string } }).error.type]).toEqual([403, 'permission_denied']);

    const opened = await post('/decode', body, { authorization: `Bearer ${f.tenant.token}` });
    expect(opened.status).toBe(200);
    expect(opened.headers.get('cache-control')).toBe('no-store');
    const [plain] = ((await opened.json()) as { payloads: WirePayload[] }).payloads;
    expect(Buffer.from(plain!.metadata.encoding!, 'base64').toString()).toBe('json/plain');
    expect(JSON.parse(Buffer.from(plain!.data, 'base64').toString())).toMatchObject({ job: { request: { prompt } } });

    // A payload written before sealing was on passes through; encode then decode is the identity.
    const unsealed = wire(defaultPayloadConverter.toPayload({ hello: 'world' }));
    const through = await post('/decode', { payloads: [unsealed] }, { authorization: `Bearer ${f.tenant.token}` });
    expect(((await through.json()) as { payloads: WirePayload[] }).payloads).toEqual([unsealed]);
    const encoded = ((await (await post('/encode', { payloads: [unsealed] }, { authorization: `Bearer ${f.tenant.token}` })).json()) as { payloads: WirePayload[] }).payloads;
    expect(Buffer.from(encoded[0]!.metadata.encoding!, 'base64').toString()).toBe(SEALED_PAYLOAD_ENCODING);
    const back = await post('/decode', { payloads: encoded }, { authorization: `Bearer ${f.tenant.token}` });
    expect(((await back.json()) as { payloads: WirePayload[] }).payloads).toEqual([unsealed]);

    // Not a payload list: the spec's error body.
    const bad = await post('/decode', { payloads: 'nope' }, { authorization: `Bearer ${f.tenant.token}` });
    expect([bad.status, ((await bad.json()) as { error: { type: string } }).error.type]).toEqual([400, 'invalid_request_error']);
  });

  it('serves the Temporal CLI: `temporal workflow show --codec-endpoint` shows the prompt', async () => {
    // Not execFileSync: the API answering the CLI runs in this process.
    const run = async (args: string[]) => (await promisify(execFile)(resolveTemporalCli(), args, { encoding: 'utf8' })).stdout;
    const shown = await run([
      'workflow', 'show', '--workflow-id', workflowId, '--address', process.env.TEMPORAL_ADDRESS!, '--output', 'json',
      '--codec-endpoint', `${f.api.url}/temporal-codec`, '--codec-auth', `Bearer ${f.tenant.token}`,
    ]);
    type Shown = { events: Array<{ workflowExecutionStartedEventAttributes?: { input: { payloads: WirePayload[] } } }> };
    const inputOf = (json: string) => (JSON.parse(json) as Shown).events[0]!.workflowExecutionStartedEventAttributes!.input.payloads[0]!;
    const decoded = inputOf(shown);
    expect(Buffer.from(decoded.metadata.encoding!, 'base64').toString()).toBe('json/plain');
    expect(Buffer.from(decoded.data, 'base64').toString()).toContain(prompt);
    // Without the codec the CLI shows what Temporal stores: sealed.
    const stored = inputOf(await run(['workflow', 'show', '--workflow-id', workflowId, '--address', process.env.TEMPORAL_ADDRESS!, '--output', 'json']));
    expect(Buffer.from(stored.metadata.encoding!, 'base64').toString()).toBe(SEALED_PAYLOAD_ENCODING);
    expect(Buffer.from(stored.data, 'base64').toString()).not.toContain('secret prompt');
  });

  it('serves the Temporal UI: CORS for its origin only, and a session cookie that ends with its token', async () => {
    const preflight = await fetch(`${f.api.url}/temporal-codec/decode`, { method: 'OPTIONS', headers: { origin: UI, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-namespace' } });
    expect([preflight.status, preflight.headers.get('access-control-allow-origin'), preflight.headers.get('access-control-allow-credentials')]).toEqual([204, UI, 'true']);
    expect(preflight.headers.get('access-control-allow-headers')).toContain('x-namespace');
    const elsewhere = await fetch(`${f.api.url}/temporal-codec/decode`, { method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
    expect(elsewhere.headers.get('access-control-allow-origin')).toBeNull();

    // An operator's own token (owner of the operator organization), its session cookie.
    const db = f.database.db;
    const session = await post('/session', {}, { authorization: `Bearer ${f.tenant.token}`, origin: UI });
    expect(session.status).toBe(200);
    const cookie = session.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^gw_temporal_codec=[^;]+; path=\/temporal-codec; .*httponly/i);
    expect(cookie).toMatch(/samesite=lax/i);
    const [sealed] = await startedInput();
    const withCookie = await post('/decode', { payloads: [wire(sealed!)] }, { cookie: cookie.split(';')[0]!, origin: UI, 'x-namespace': 'default' });
    expect([withCookie.status, withCookie.headers.get('access-control-allow-origin')]).toEqual([200, UI]);

    // Revoking the token ends the session.
    const extra = await issueManagementToken(db, { orgId: f.tenant.orgId, name: `codec ${prefix}`, scopes: ['jobs:read'], createdByMemberId: f.tenant.memberId });
    const second = await post('/session', {}, { authorization: `Bearer ${extra.token}` });
    expect(second.status).toBe(200);
    const secondCookie = second.headers.get('set-cookie')!.split(';')[0]!;
    expect((await post('/decode', { payloads: [wire(sealed!)] }, { cookie: secondCookie })).status).toBe(200);
    await db.update(managementTokens).set({ revokedAt: new Date() }).where(eq(managementTokens.tokenHash, sha256Hex(extra.token)));
    expect((await post('/decode', { payloads: [wire(sealed!)] }, { cookie: secondCookie })).status).toBe(401);
    // A cookie that is not ours opens nothing.
    expect((await post('/decode', { payloads: [wire(sealed!)] }, { cookie: 'gw_temporal_codec=forged' })).status).toBe(401);
  });

  it('over https, the session cookie is SameSite=None and Secure: a Temporal UI on another site sends it (issue 55)', async () => {
    // Behind a TLS-terminating proxy, as a deployment serves it.
    const behindTls = await startTestApi({ env: { GW_TEMPORAL_UI_URL: 'https://temporal.ops.example', GW_OPERATOR_ORG_ID: f.tenant.orgId, GW_TRUST_PROXY: 'true' } });
    try {
      const session = await fetch(`${behindTls.url}/temporal-codec/session`, { method: 'POST', headers: { authorization: `Bearer ${f.tenant.token}`, origin: 'https://temporal.ops.example', 'x-forwarded-proto': 'https', 'content-type': 'application/json' }, body: '{}' });
      expect(session.status).toBe(200);
      const cookie = session.headers.get('set-cookie')!;
      expect(cookie).toMatch(/samesite=none/i);
      expect(cookie).toMatch(/;\s*secure/i);
    } finally {
      await behindTls.close();
    }
  });
});

describe('payload sealing across a key rotation', () => {
  it('opens payloads sealed with a retired key and seals new ones with the current key', async () => {
    const oldKeys = newKeyring(1);
    const rotated = `${newKeyring(2)},${oldKeys}`;
    const before = sealingPayloadCodec(createSealer(oldKeys));
    const after = sealingPayloadCodec(createSealer(rotated));
    const plain = defaultPayloadConverter.toPayload({ prompt: 'rotate me' });
    const [sealedBefore] = await before.encode([plain]);
    expect(Buffer.from(sealedBefore!.metadata!['gw-key-version']!).toString()).toBe('1');
    const [opened] = await after.decode([sealedBefore!]);
    expect(defaultPayloadConverter.fromPayload(opened!)).toEqual({ prompt: 'rotate me' });
    const [sealedAfter] = await after.encode([plain]);
    expect(Buffer.from(sealedAfter!.metadata!['gw-key-version']!).toString()).toBe('2');
    await expect(before.decode([sealedAfter!])).rejects.toThrow();
  });
});
