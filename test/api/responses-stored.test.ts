import { eq, inArray, sql } from 'drizzle-orm';
import type { PoolClient } from 'pg';
import { connectDatabase, type DatabaseHandle } from '../../core/db/client';
import { gatewayKeys, requestLogs, storedResponses } from '../../core/db/schema';
import {
  findConversationHead, findStoredResponse, loadConversation, MAX_CONVERSATION_BYTES, MAX_CONVERSATION_TURNS, storedResponseReader,
} from '../../core/responses/stored-responses';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { until } from '../helpers/until';

/**
 * Kept Responses (issue 52): read, continued and deleted only where the request log would show
 * the body; kept one row a turn within a conversation's bounds, and read only as far as a call
 * needs; holding what the request log holds, guardrail matches redacted.
 */
describe('kept Responses: who reads them, how and what they keep', () => {
  let g: ChatFixture;
  let seq = 0;
  const fresh = (text = 'Say hello') => `${text} #${Date.now()}-${seq++}`;

  const responses = (key: string, body: Record<string, unknown>) => g.post('/v1/responses', { model: 'openai/gpt-4o-mini', ...body }, { authorization: `Bearer ${key}` });
  const get = async (key: string, path: string, method = 'GET') => {
    const res = await fetch(`${g.api.url}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
    return { status: res.status, json: await res.json() as Loose };
  };
  const keyOf = async (settings: Record<string, unknown> = {}) => {
    const res = await g.client.post<{ id: string; secret: string }>('/gateway_keys', { label: `kept ${seq++}`, project_id: g.tenant.projectId, ...settings });
    expect(res.status).toBe(201);
    return res.body;
  };
  const logRow = (id: string) => until(async () => (await g.database.db.select().from(requestLogs).where(eq(requestLogs.id, id)))[0], `request-log row ${id}`);
  const row = async (id: string) => (await g.database.db.select().from(storedResponses).where(eq(storedResponses.id, id)))[0];

  beforeAll(async () => {
    g = await startChatFixture();
    await g.connect('openai');
    const current = await g.client.get<Loose>('/org_settings');
    expect((await g.client.patch('/org_settings', { prompt_logging_enabled: true }, current.etag!)).status).toBe(200);
    await g.settle();
  });
  afterAll(() => g.close());

  describe('the request log\'s body rule', () => {
    it('reads, continues and deletes another key\'s response exactly where the request log shows that key the body, across projects', async () => {
      const maker = await keyOf({ observability_access: 'scoped' });
      const made = await responses(maker.secret, { input: fresh('My secret is zebra-quartz.') });
      expect(made.json.store).toBe(true);
      const id = made.json.id as string;
      await logRow(made.id);
      const elsewhere = (await g.client.post<{ id: string }>('/projects', { name: `elsewhere ${seq++}` })).body.id;
      const readers: Record<string, { key: { id: string; secret: string }; reads: boolean }> = {
        'none': { key: await keyOf(), reads: false },
        'scoped': { key: await keyOf({ observability_access: 'scoped' }), reads: false },
        'scoped with payload_access': { key: await keyOf({ observability_access: 'scoped', payload_access: true }), reads: false },
        'organization': { key: await keyOf({ observability_access: 'organization' }), reads: false },
        'organization, another project': { key: await keyOf({ observability_access: 'organization', project_id: elsewhere }), reads: false },
        'organization with payload_access': { key: await keyOf({ observability_access: 'organization', payload_access: true }), reads: true },
        'organization with payload_access, another project': { key: await keyOf({ observability_access: 'organization', payload_access: true, project_id: elsewhere }), reads: true },
      };
      for (const [name, { key, reads }] of Object.entries(readers)) {
        // The request log's answer for the request that made it decides.
        const logged = await get(key.secret, `/v1/requests/${made.id}`);
        const bodyShown = logged.status === 200 && logged.json.request != null;
        expect({ name, bodyShown }).toEqual({ name, bodyShown: reads });

        const read = await get(key.secret, `/v1/responses/${id}`);
        expect({ name, status: read.status }).toEqual({ name, status: reads ? 200 : 404 });
        const continued = await responses(key.secret, { input: 'What is my secret?', previous_response_id: id });
        expect({ name, status: continued.status }).toEqual({ name, status: reads ? 200 : 404 });
        if (!reads) {
          // As for an id that does not exist.
          const unknown = await get(key.secret, '/v1/responses/resp_nothing_here');
          expect([read.status, { ...read.json.error, message: null }]).toEqual([unknown.status, { ...unknown.json.error, message: null }]);
          expect(continued.json.error).toMatchObject({ type: 'not_found', param: 'previous_response_id' });
          expect(JSON.stringify([read.json, continued.json])).not.toContain('zebra-quartz');
          expect((await get(key.secret, `/v1/responses/${id}`, 'DELETE')).status).toBe(404);
          expect(await row(id)).toBeDefined();
        }
      }

      // payload_access is read when asked, not from the key cache: taken away, it is gone at once.
      const revoked = readers['organization with payload_access']!.key;
      const current = await g.client.get<Loose>(`/gateway_keys/${revoked.id}`);
      expect((await g.client.patch(`/gateway_keys/${revoked.id}`, { payload_access: false }, current.etag!)).status).toBe(200);
      expect((await get(revoked.secret, `/v1/responses/${id}`)).status).toBe(404);

      const deleter = readers['organization with payload_access, another project']!.key;
      expect((await get(deleter.secret, `/v1/responses/${id}`, 'DELETE')).json).toEqual({ id, object: 'response', deleted: true });
      expect(await row(id)).toBeUndefined();
    });

    it('shows others\' turns only within the plan\'s history window, as the request log does, however long the retention', async () => {
      const setRetention = async (days: number) => {
        const current = await g.client.get<Loose>('/org_settings');
        expect((await g.client.patch('/org_settings', { prompt_logging_retention_days: days }, current.etag!)).status).toBe(200);
      };
      const maker = await keyOf({ observability_access: 'scoped' });
      const reader = await keyOf({ observability_access: 'organization', payload_access: true });
      const made = await responses(maker.secret, { input: fresh() });
      await logRow(made.id);
      // Past the business plan's 90 days, within a 120-day retention.
      const old = new Date(Date.now() - 100 * 86_400_000);
      await g.database.db.update(storedResponses).set({ createdAt: old }).where(eq(storedResponses.id, made.json.id));
      await g.database.db.update(requestLogs).set({ createdAt: old }).where(eq(requestLogs.id, made.id));
      await setRetention(120);
      try {
        expect((await get(reader.secret, `/v1/requests/${made.id}`)).status).toBe(404);
        expect((await get(reader.secret, `/v1/responses/${made.json.id}`)).status).toBe(404);
        expect((await get(maker.secret, `/v1/responses/${made.json.id}`)).status).toBe(200);
      } finally {
        await setRetention(30);
      }
    });

    it('lets a key\'s own lineage read, continue and delete its own conversation without payload_access, as store promises', async () => {
      for (const access of ['none', 'scoped']) {
        const maker = await keyOf({ observability_access: access });
        const made = await responses(maker.secret, { input: fresh('My name is Ada.') });
        // The request log shows this key no body...
        await logRow(made.id);
        const logged = await get(maker.secret, `/v1/requests/${made.id}`);
        expect(logged.status === 200 ? logged.json.request ?? null : null).toBeNull();
        // ...but the conversation is its own.
        expect((await get(maker.secret, `/v1/responses/${made.json.id}`)).status).toBe(200);
        const next = await responses(maker.secret, { input: 'What is my name?', previous_response_id: made.json.id });
        expect(next.status).toBe(200);
        expect((await get(maker.secret, `/v1/responses/${next.json.id}`, 'DELETE')).status).toBe(200);
      }
    });
  });

  describe('one row a turn', () => {
    /** A pool of one connection counting the bytes Postgres sends it: what a read loads. */
    let counted: DatabaseHandle;
    let received = 0;
    beforeAll(() => {
      counted = connectDatabase(process.env.DATABASE_URL!, { max: 1 });
      counted.pool.on('connect', (client: PoolClient) => {
        (client as unknown as { connection: { stream: NodeJS.ReadableStream } }).connection.stream.on('data', (chunk: Buffer) => {
          received += chunk.length;
        });
      });
    });
    afterAll(() => counted.close());
    const loaded = async <T>(read: () => Promise<T>): Promise<{ value: T; bytes: number }> => {
      await counted.db.execute(sql`select 1`);
      const before = received;
      const value = await read();
      return { value, bytes: received - before };
    };
    const readerFor = async (key: { id: string }) => {
      const [k] = await g.database.db.select({ lineageId: gatewayKeys.lineageId }).from(gatewayKeys).where(eq(gatewayKeys.id, key.id));
      return storedResponseReader({ orgId: g.tenant.orgId, keyId: key.id, lineageId: k!.lineageId, observabilityAccess: 'scoped' }, 'business', new Date());
    };

    it('keeps each turn once; a read loads that turn\'s response only, a continuation each turn once', async () => {
      const key = await keyOf();
      const TURNS = 8;
      const PAD = 'x'.repeat(64_000);
      const ids: string[] = [];
      for (let i = 0; i < TURNS; i++) {
        const res = await responses(key.secret, { input: `Turn ${i} ${PAD}`, ...(ids.length > 0 && { previous_response_id: ids.at(-1) }) });
        expect(res.status).toBe(200);
        ids.push(res.json.id);
      }
      // The provider was sent the whole conversation.
      const sent = JSON.stringify(g.sandbox.received.at(-1)!.body);
      for (let i = 0; i < TURNS; i++) expect(sent).toContain(`Turn ${i} `);

      const rows = await g.database.db.select({
        id: storedResponses.id, previousId: storedResponses.previousId, depth: storedResponses.depth, conversationBytes: storedResponses.conversationBytes,
        inputBytes: sql<number>`octet_length(${storedResponses.input}::text)`,
      }).from(storedResponses).where(inArray(storedResponses.id, ids));
      rows.sort((a, b) => a.depth - b.depth);
      expect(rows.map((r) => [r.id, r.previousId, r.depth])).toEqual(ids.map((id, i) => [id, i === 0 ? null : ids[i - 1], i + 1]));
      // Each row holds its own turn's input, not the conversation's.
      for (const r of rows) expect(r.inputBytes).toBeLessThan(PAD.length * 1.1);
      rows.forEach((r, i) => {
        expect(r.conversationBytes).toBeGreaterThan((i + 1) * PAD.length);
        expect(r.conversationBytes).toBeLessThan((i + 1) * PAD.length * 1.2);
      });

      const reader = await readerFor(key);
      const last = ids.at(-1)!;
      // GET: the last turn's response object, none of the conversation's input.
      const got = await loaded(() => findStoredResponse(counted.db, reader, last));
      expect(got.value).toMatchObject({ id: last, object: 'response' });
      expect(got.bytes).toBeLessThan(PAD.length / 4);
      // A continuation: the turn named, then every turn's input and output once.
      const head = await loaded(() => findConversationHead(counted.db, reader, last));
      expect(head.bytes).toBeLessThan(PAD.length / 4);
      const chain = await loaded(() => loadConversation(counted.db, reader, head.value!));
      expect(chain.value!.filter((item) => item.role === 'user').map((item) => String(item.content).split(' ', 2).join(' '))).toEqual(ids.map((_, i) => `Turn ${i}`));
      expect(chain.bytes).toBeGreaterThan(TURNS * PAD.length);
      expect(chain.bytes).toBeLessThan(TURNS * PAD.length * 1.2);
    });

    it('refuses a continuation past the most turns, 400 conversation_too_long, before anything is sent', async () => {
      const key = await keyOf();
      const first = await responses(key.secret, { input: fresh() });
      // The rest of a conversation at the bound, kept as the gateway keeps turns.
      const base = first.json.id as string;
      const [kept] = await g.database.db.select().from(storedResponses).where(eq(storedResponses.id, base));
      await g.database.db.execute(sql`
        insert into stored_responses (id, org_id, key_id, lineage_id, previous_id, depth, conversation_bytes, input, response)
        select ${base}::text || '_' || n, ${kept!.orgId}::text, ${kept!.keyId}::text, ${kept!.lineageId}::text, case when n = 2 then ${base}::text else ${base}::text || '_' || (n - 1) end, n,
          ${kept!.conversationBytes}::bigint + (n - 1) * 200, jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'turn ' || n)),
          jsonb_build_object('id', ${base}::text || '_' || n, 'object', 'response', 'output', jsonb_build_array(jsonb_build_object('type', 'message', 'role', 'assistant', 'content', jsonb_build_array(jsonb_build_object('type', 'output_text', 'text', 'ok ' || n)))))
        from generate_series(2, ${MAX_CONVERSATION_TURNS}::int) n`);
      const last = `${base}_${MAX_CONVERSATION_TURNS}`;
      const sentBefore = g.sandbox.received.length;
      const refused = await responses(key.secret, { input: 'One more', previous_response_id: last });
      expect(refused.status).toBe(400);
      expect(refused.json.error).toMatchObject({ type: 'invalid_request_error', code: 'conversation_too_long', param: 'previous_response_id' });
      expect(g.sandbox.received.length).toBe(sentBefore);
      // Nothing kept: the whole conversation is still sent.
      const unkept = await responses(key.secret, { input: 'One more', previous_response_id: last, store: false });
      expect(unkept.status).toBe(200);
      expect(JSON.stringify(g.sandbox.received.at(-1)!.body)).toContain(`turn ${MAX_CONVERSATION_TURNS}`);
    });

    it('refuses a continuation that would keep more than the most bytes, 400 conversation_too_large, before anything is sent', async () => {
      const key = await keyOf();
      const big = (n: number) => 'y'.repeat(n);
      const first = await responses(key.secret, { input: `Big ${big(20_000_000)}` });
      expect(first.json.store).toBe(true);
      const sentBefore = g.sandbox.received.length;
      const refused = await responses(key.secret, { input: `Bigger ${big(MAX_CONVERSATION_BYTES - 20_000_000)}`, previous_response_id: first.json.id });
      expect(refused.status).toBe(400);
      expect(refused.json.error).toMatchObject({ type: 'invalid_request_error', code: 'conversation_too_large', param: 'previous_response_id' });
      expect(g.sandbox.received.length).toBe(sentBefore);
      // Room is left for a small turn.
      const small = await responses(key.secret, { input: 'And a small one', previous_response_id: first.json.id });
      expect(small.status).toBe(200);
      expect((await row(small.json.id))!.conversationBytes).toBeLessThan(MAX_CONVERSATION_BYTES);
    });

    it('a continuation through a turn deleted or expired is a 404 naming previous_response_id; the later turns still read', async () => {
      const key = await keyOf();
      const a = await responses(key.secret, { input: fresh('First') });
      const b = await responses(key.secret, { input: 'Second', previous_response_id: a.json.id });
      const c = await responses(key.secret, { input: 'Third', previous_response_id: b.json.id });
      expect((await get(key.secret, `/v1/responses/${b.json.id}`, 'DELETE')).status).toBe(200);
      expect((await get(key.secret, `/v1/responses/${c.json.id}`)).status).toBe(200);
      const broken = await responses(key.secret, { input: 'Fourth', previous_response_id: c.json.id });
      expect(broken.status).toBe(404);
      expect(broken.json.error).toMatchObject({ type: 'not_found', param: 'previous_response_id', message: expect.stringContaining('expired or was deleted') });
      expect((await responses(key.secret, { input: 'Again', previous_response_id: a.json.id })).status).toBe(200);

      // The first turn past the retention: the second reads, but no longer continues.
      const d = await responses(key.secret, { input: fresh('Old') });
      const e = await responses(key.secret, { input: 'New', previous_response_id: d.json.id });
      await g.database.db.update(storedResponses).set({ createdAt: new Date(Date.now() - 31 * 86_400_000) }).where(eq(storedResponses.id, d.json.id));
      expect((await get(key.secret, `/v1/responses/${e.json.id}`)).status).toBe(200);
      expect((await responses(key.secret, { input: 'Newer', previous_response_id: e.json.id })).json.error).toMatchObject({ type: 'not_found', param: 'previous_response_id' });
    });
  });

  describe('what is kept is what the request log keeps', () => {
    const email = 'alice@example.com';
    const answerEmail = 'bob@example.com';
    const instructionsEmail = 'carol@example.com';
    let key: { id: string; secret: string };
    beforeAll(async () => {
      key = await keyOf();
      expect((await g.client.post('/guardrail_policies', {
        target: `key:${key.id}`,
        rules: [
          { detector: 'email', stage: 'input', action: 'redact' },
          { detector: 'keywords', stage: 'input', action: 'flag', words: ['platypus'] },
          { detector: 'email', stage: 'output', action: 'flag' },
        ],
      })).status).toBe(201);
      await g.settle();
    });

    it.each([false, true])('redacts input matches, flagged ones too, and a flagged answer (stream: %s)', async (stream) => {
      const reply = `Write to ${answerEmail} today`;
      const res = await responses(key.secret, {
        stream,
        instructions: `Sign as ${instructionsEmail}.`,
        input: [
          { role: 'user', content: [{ type: 'input_text', text: `Mail ${email} about the platypus ` }, { type: 'input_text', text: `[sandbox reply=${encodeURIComponent(reply)}]` }] },
        ],
      });
      expect(res.status).toBe(200);
      // The flagged answer reached the client as it was; the email in the prompt did not reach the model.
      expect(res.text).toContain(answerEmail);
      expect(JSON.stringify(g.sandbox.received.at(-1)!.body)).not.toContain(email);
      const id = stream ? (res.text.match(/"id":"(resp_[^"]+)"/)![1]!) : res.json.id as string;

      const kept = await row(id);
      const log = await logRow(res.id);
      for (const stored of [kept, log.requestBody, log.responseBody]) {
        const text = JSON.stringify(stored);
        for (const matched of [email, 'platypus', answerEmail, instructionsEmail]) expect(text).not.toContain(matched);
      }
      expect(JSON.stringify(kept!.input)).toContain('[REDACTED:EMAIL]');
      expect(JSON.stringify(kept!.response.output)).toContain('[REDACTED:EMAIL]');
      expect(kept!.response.instructions).toContain('[REDACTED:EMAIL]');
      const read = await get(key.secret, `/v1/responses/${id}`);
      expect(JSON.stringify(read.json)).not.toContain(answerEmail);

      // A continuation sends the kept, redacted conversation.
      const next = await responses(key.secret, { input: 'And then?', previous_response_id: id });
      expect(next.status).toBe(200);
      const sent = JSON.stringify(g.sandbox.received.at(-1)!.body);
      for (const matched of [email, 'platypus', answerEmail]) expect(sent).not.toContain(matched);
    });
  });
});
