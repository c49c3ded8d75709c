import { and, eq, inArray } from 'drizzle-orm';
import { decisionPolicies, requestLogs, spendLedger } from '../../core/db/schema';
import { randomClientAddress } from '../helpers/harness';
import { manageClient } from '../helpers/manage-client';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { createTenant } from '../helpers/tenants';
import { until } from '../helpers/until';

const SCHEMA = { type: 'object', properties: { queue: { type: 'string' }, priority: { type: 'integer' } }, required: ['queue', 'priority'], additionalProperties: false };
const FALLBACK = { queue: 'general', priority: 3 };

/**
 * Issue 24: `POST /v1/decisions/{slug}` through the sandbox over real HTTP: a typed answer
 * within the deadline, or the fallback with its reason; the gateway's own refusals are never
 * replaced by the fallback.
 */
describe('decision policies: POST /v1/decisions/{slug}', () => {
  let f: ChatFixture;
  let secret: string;
  let seq = 0;

  const policy = async (fields: Record<string, unknown>) => {
    const res = await f.client.post<Loose>('/decision_policies', {
      slug: `triage-${seq++}`, model: 'openai/gpt-4o-mini', instructions: 'Route the support ticket to a queue.', output_schema: SCHEMA, fallback: FALLBACK, deadline_ms: 5000, ...fields,
    });
    expect(res.status).toBe(201);
    return res.body;
  };
  const decide = async (slug: string, body: Record<string, unknown>, key = secret) => {
    const sent = performance.now();
    const res = await fetch(`${f.api.url}/v1/decisions/${slug}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: JSON.stringify(body),
    });
    const json = await res.json() as Loose;
    return { status: res.status, json, requestId: res.headers.get('x-gw-request-id')!, elapsed: performance.now() - sent };
  };
  const rowsOf = async (decisionId: string, count: number) => until(async () => {
    const rows = await f.database.db.select().from(requestLogs).where(and(eq(requestLogs.orgId, f.tenant.orgId), eq(requestLogs.decisionId, decisionId)));
    return rows.length >= count ? rows : null;
  }, `${count} request-log rows of ${decisionId}`);
  const toSandbox = () => f.sandbox.received.filter((r) => r.path.endsWith('/chat/completions')).length;

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    secret = await f.key();
  });
  afterAll(() => f.close());

  it('answers a valid decision with its cost, and logs the model call (endpoint `decisions`, with the decision id)', async () => {
    const p = await policy({});
    const res = await decide(p.slug, { input: { subject: 'Card declined', body: 'My payment failed twice.' } });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      object: 'decision', policy: p.slug, policy_version: 1, decision: { queue: 'sandbox', priority: 1 }, source: 'model', reason: null,
      provider: 'openai', usage: { price_source: 'list' },
    });
    expect(res.json.id).toMatch(/^dec_/);
    expect(res.json.model).toContain('gpt-4o-mini');
    expect(res.json.usage.cost).toBeGreaterThan(0);
    expect(res.json.usage.total_tokens).toBe(res.json.usage.prompt_tokens + res.json.usage.completion_tokens);

    // The schema went as structured output and in the instructions; the input as the user's message.
    const sent = f.sandbox.received.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!.body as Loose;
    expect(sent.response_format).toMatchObject({ type: 'json_schema', json_schema: { schema: SCHEMA } });
    expect(sent.messages[0].content).toContain('Route the support ticket');
    const system = sent.messages[0].content as string;
    expect(JSON.parse(system.slice(system.indexOf('{')))).toEqual(SCHEMA);
    expect(JSON.parse(sent.messages[1].content)).toEqual({ subject: 'Card declined', body: 'My payment failed twice.' });

    const [row] = await rowsOf(res.json.id, 1);
    expect(row).toMatchObject({ id: res.requestId, endpoint: 'decisions', status: 200, decisionId: res.json.id, provider: 'openai' });
    expect(row!.cost).toBeCloseTo(res.json.usage.cost, 12);
    const read = await f.client.get<Loose>(`/requests/${res.requestId}`);
    expect(read.body).toMatchObject({ endpoint: 'decisions', decision_id: res.json.id });
  });

  it('answers the fallback at the deadline when the provider is slower, and aborts the upstream request', async () => {
    const p = await policy({ deadline_ms: 400 });
    const abandoned = f.sandbox.abandonedWaits();
    const res = await decide(p.slug, { input: 'A slow one [sandbox delay_ms=1500]' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ decision: FALLBACK, source: 'fallback', reason: 'deadline', model: null, provider: null });
    // Issue 24's bar: within the deadline plus 50 ms, as the gateway measured it.
    expect(res.json.latency_ms).toBeLessThanOrEqual(450);
    expect(res.elapsed).toBeLessThan(4000);
    await until(async () => f.sandbox.abandonedWaits() > abandoned, 'the sandbox to see the upstream request aborted');
    const [row] = await rowsOf(res.json.id, 1);
    // The provider was sent the call and bills it: the prompt is charged, not $0 (issue 33).
    expect(row).toMatchObject({ status: 408, errorCode: 'decision_deadline', provider: null });
    expect(row!.cost).toBeGreaterThan(0);
    const [charged] = await until(async () => {
      const found = await f.database.db.select().from(spendLedger).where(eq(spendLedger.requestId, row!.id));
      return found.length === 1 ? found : null;
    }, 'the cut call settled in the ledger');
    expect([charged!.state, charged!.amount, charged!.provider, charged!.model]).toEqual(['settled', row!.cost, 'openai', 'gpt-4o-mini']);

    // The caller may shorten the deadline, never lengthen it.
    const shorter = await decide(p.slug, { input: 'Slow again [sandbox delay_ms=1500]', deadline_ms: 150 });
    expect(shorter.json).toMatchObject({ source: 'fallback', reason: 'deadline' });
    expect(shorter.json.latency_ms).toBeLessThanOrEqual(200);
    const longer = await decide(p.slug, { input: 'And again [sandbox delay_ms=1500]', deadline_ms: 60_000 });
    expect(longer.json.latency_ms).toBeLessThanOrEqual(450);
  });

  it('answers 408 decision_deadline when the deadline passes and the policy has no fallback', async () => {
    const p = await policy({ deadline_ms: 300, fallback: null });
    const res = await decide(p.slug, { input: 'Too slow [sandbox delay_ms=3000]' });
    expect([res.status, res.json.error?.type, res.json.error?.code]).toEqual([408, 'request_timeout', 'decision_deadline']);
  });

  it('asks once more after an answer that is not valid, and uses the second', async () => {
    const p = await policy({});
    const before = toSandbox();
    const res = await decide(p.slug, { input: `Garbled first [sandbox raw_reply=not%20json times=1] ${seq++}` });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ source: 'model', reason: null, decision: { queue: 'sandbox', priority: 1 } });
    expect(toSandbox() - before).toBe(2);
    // Two model calls, two rows of the one decision, and the usage of both in the answer.
    const rows = await rowsOf(res.json.id, 2);
    expect(rows).toHaveLength(2);
    expect(new Set(rows.map((r) => r.id)).size).toBe(2);
    expect(res.json.usage.cost).toBeCloseTo(rows.reduce((sum, r) => sum + r.cost!, 0), 12);
    // Each call held and settled its own spend: one ledger row per call, by its row's id.
    const ledger = await until(async () => {
      const found = await f.database.db.select().from(spendLedger).where(inArray(spendLedger.requestId, rows.map((r) => r.id)));
      return found.length === 2 ? found : null;
    }, 'two settled ledger rows');
    expect(ledger.map((l) => l.state)).toEqual(['settled', 'settled']);
    // Each names what served it, which commitments match on (issue 33).
    expect(ledger.map((l) => [l.provider, l.model])).toEqual([['openai', 'gpt-4o-mini'], ['openai', 'gpt-4o-mini']]);
  });

  it('answers the fallback (invalid_output) after two answers that are not valid, or 502 without one', async () => {
    const p = await policy({});
    const wrongShape = encodeURIComponent(JSON.stringify({ queue: 7 }));
    const res = await decide(p.slug, { input: `Always wrong [sandbox raw_reply=${wrongShape}]` });
    expect(res.json).toMatchObject({ source: 'fallback', reason: 'invalid_output', decision: FALLBACK, provider: 'openai' });
    expect(res.json.usage.cost).toBeGreaterThan(0);
    const bare = await policy({ fallback: null });
    const refused = await decide(bare.slug, { input: 'Always prose [sandbox raw_reply=I%20think%20billing]' });
    expect([refused.status, refused.json.error?.type]).toEqual([502, 'upstream_error']);
  });

  it('answers the fallback (upstream_error) when every provider fails, or the usual error without one', async () => {
    const p = await policy({});
    const res = await decide(p.slug, { input: 'Down [sandbox status=500]' });
    expect(res.json).toMatchObject({ source: 'fallback', reason: 'upstream_error', decision: FALLBACK });
    const bare = await policy({ fallback: null });
    const refused = await decide(bare.slug, { input: 'Down [sandbox status=500]' });
    expect(refused.status).toBeGreaterThanOrEqual(500);
    expect(refused.json.error?.type).toBeDefined();
  });

  it('answers one 404 for an unknown slug, a disabled policy, another project\'s policy, a model the key may not call, and another organization\'s slug', async () => {
    const expect404 = async (slug: string, key = secret) => {
      const res = await decide(slug, { input: 'x' }, key);
      expect([slug, res.status, res.json.error?.type, res.json.error?.code]).toEqual([slug, 404, 'not_found', 'decision_policy_not_found']);
    };
    await expect404('no-such-policy');
    await expect404((await policy({ enabled: false })).slug);
    const project = await f.client.post<Loose>('/projects', { name: `elsewhere ${seq++}` });
    await expect404((await policy({ project_ids: [project.body.id] })).slug);
    const narrow = await f.key({ model_allowlist: ['openai/gpt-4o'] });
    const open = await policy({});
    await expect404(open.slug, narrow);
    expect((await decide(open.slug, { input: 'x' })).status).toBe(200);

    const other = await createTenant(f.database.db);
    const stranger = manageClient(f.api.url, other.token);
    const theirs = await stranger.post<Loose>('/decision_policies', { slug: `theirs-${seq++}`, model: 'openai/gpt-4o-mini', output_schema: SCHEMA });
    expect(theirs.status).toBe(201);
    await expect404(theirs.body.slug);
  });

  it('refuses a request when a blocking budget is too small (402), never with the fallback', async () => {
    // gpt-4o's output ceiling alone is worth more than a cent.
    const p = await policy({ model: 'openai/gpt-4o' });
    const poor = await f.key({ credit_limit: { amount: 0.01, period: 'monthly' } });
    const res = await decide(p.slug, { input: 'Costly' }, poor);
    expect([res.status, res.json.error?.type, res.json.error?.code]).toEqual([402, 'budget_exceeded', 'key_budget']);
  });

  it('refuses policies whose schema is invalid or not an object, a fallback the schema refuses, and a duplicate slug', async () => {
    const refusals: Array<[Record<string, unknown>, string]> = [
      [{ output_schema: { type: 'object', properties: { queue: { type: 'strange' } } } }, 'output_schema'],
      [{ output_schema: { type: 'string' } }, 'output_schema'],
      [{ output_schema: { type: 'object', $async: true } }, 'output_schema'],
      [{ fallback: { queue: 'general' } }, 'fallback'],
      [{ deadline_ms: 99 }, 'deadline_ms'],
      [{ instructions: 'x'.repeat(20_001) }, 'instructions'],
    ];
    for (const [fields, field] of refusals) {
      const res = await f.client.post<Loose>('/decision_policies', { slug: `bad-${seq++}`, model: 'openai/gpt-4o-mini', output_schema: SCHEMA, ...fields });
      expect([field, res.status, res.body.error?.type]).toEqual([field, 400, 'invalid_request_error']);
      expect(res.body.error?.message).toContain(field);
    }
    const p = await policy({});
    const duplicate = await f.client.post<Loose>('/decision_policies', { slug: p.slug, model: 'openai/gpt-4o-mini', output_schema: SCHEMA });
    expect([duplicate.status, duplicate.body.error?.message]).toEqual([400, expect.stringContaining('slug')]);
    // A patch to the schema checks the fallback it keeps.
    const patched = await f.client.patch<Loose>(`/decision_policies/${p.id}`, { output_schema: { type: 'object', required: ['team'] } }, '"1"');
    expect([patched.status, patched.body.error?.message]).toEqual([400, expect.stringContaining('fallback')]);
  });

  it('runs a policy\'s catastrophic pattern in linear time: at create (the fallback) and on every answer (issue 33)', async () => {
    const hostile = { type: 'object', required: ['answer'], properties: { answer: { type: 'string', pattern: '^(a+)+$' } } };
    const evil = `${'a'.repeat(50)}!`;
    const refused = await f.client.post<Loose>('/decision_policies', { slug: `redos-${seq++}`, model: 'openai/gpt-4o-mini', output_schema: hostile, fallback: { answer: evil } });
    expect([refused.status, refused.body.error?.message]).toEqual([400, expect.stringContaining('fallback')]);
    // A back-reference RE2 cannot run is refused at create, naming the schema.
    const backReference = await f.client.post<Loose>('/decision_policies', { slug: `redos-${seq++}`, model: 'openai/gpt-4o-mini', output_schema: { type: 'object', properties: { a: { type: 'string', pattern: '(a)\\1' } } } });
    expect([backReference.status, backReference.body.error?.message]).toEqual([400, expect.stringContaining('output_schema')]);
    const p = await policy({ output_schema: hostile, fallback: { answer: 'aaa' } });
    const reply = encodeURIComponent(JSON.stringify({ answer: `${'a'.repeat(5_000)}!` }));
    const res = await decide(p.slug, { input: `Match me [sandbox raw_reply=${reply}]` });
    expect([res.status, res.json.source, res.json.reason, res.json.decision]).toEqual([200, 'fallback', 'invalid_output', { answer: 'aaa' }]);
  });

  it('refuses a schema whose patterns are past the bounds at create and patch, naming the field, and never compiles one on a call (issue 52)', async () => {
    // The review's 5.5 KB pattern (its program kept small, so that unbounded it would be accepted, not compiled for seconds).
    const long = '[a-z]{0,9}'.repeat(550);
    const created = await f.client.post<Loose>('/decision_policies', { slug: `bounds-${seq++}`, model: 'openai/gpt-4o-mini', output_schema: { type: 'object', properties: { code: { type: 'string', pattern: long } } } });
    expect([created.status, created.body.error?.type, created.body.error?.message]).toEqual([400, 'invalid_request_error', 'Invalid `output_schema`: the pattern at `/properties/code/pattern` is 5500 characters long; at most 1000.']);
    // The review's 1,900 patternProperties (54 KB), on a patch that keeps the fallback.
    const p = await policy({});
    const many = Object.fromEntries(Array.from({ length: 1_900 }, (_, i) => [`^f${i}x$`, { type: 'string' }]));
    const patched = await f.client.patch<Loose>(`/decision_policies/${p.id}`, { output_schema: { type: 'object', patternProperties: many } }, '"1"');
    expect([patched.status, patched.body.error?.type, patched.body.error?.message]).toEqual([400, 'invalid_request_error', expect.stringMatching(/^Invalid `output_schema`: the pattern at `\/patternProperties\/\^f100x\$` is one too many: at most 100 /)]);
    // A policy stored before the bounds (written here directly) is refused when called, its schema never compiled.
    const huge = `${'\\w{0,1000}'.repeat(49)}\\s\\d\\s`;
    await f.database.db.update(decisionPolicies).set({ outputSchema: { type: 'object', properties: { queue: { type: 'string', pattern: huge } } }, version: 7 }).where(eq(decisionPolicies.id, p.id));
    const sent = toSandbox();
    const called = await decide(p.slug, { input: 'Card declined' });
    expect([called.status, called.json.error?.message]).toEqual([400, expect.stringMatching(/has an invalid `output_schema`: the pattern at `\/properties\/queue\/pattern` compiles to about \d+ RE2 instructions/)]);
    expect(toSandbox()).toBe(sent);
  });
});
