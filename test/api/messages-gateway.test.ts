import { eq } from 'drizzle-orm';
import { requestLogs } from '../../core/db/schema';
import { namedEvents, startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress } from '../helpers/harness';
import { until } from '../helpers/until';

/**
 * What the gateway does for chat applies to `POST /v1/messages` unchanged (issue 35): failover
 * before the first byte, a cut stream ending with Messages' own error event, the cache,
 * guardrails, spend settled and logged, and what cannot cross named.
 */
describe('Anthropic Messages through the one chat call', () => {
  let f: ChatFixture;
  let secret: string;
  let seq = 0;
  /** A prompt no other test sends (the cache keys on it). */
  const fresh = (text = 'Say hello') => `${text} #${Date.now()}-${seq++}`;

  const messages = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    f.post('/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 200, ...body }, { 'x-api-key': key, 'anthropic-version': '2023-06-01', ...headers });
  const events = namedEvents;

  const logRow = (id: string) => until(async () => (await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, id)))[0], `request-log row ${id}`);

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai', { name: 'healthy openai' });
    await f.connect('anthropic', { name: 'healthy anthropic' });
    secret = await f.key();
  });
  afterAll(() => f.close());

  it('fails over to a fallback before the first byte, streamed, and logs the attempts', async () => {
    const g = await startChatFixture();
    try {
      await g.connect('openai', { directives: 'status=500', name: 'broken openai' });
      await g.connect('anthropic', { name: 'good anthropic' });
      const key = await g.key();
      const res = await fetch(`${g.api.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
        body: JSON.stringify({ model: 'openai/gpt-4o-mini', max_tokens: 100, stream: true, fallbacks: ['anthropic/claude-3-5-haiku-latest'], messages: [{ role: 'user', content: fresh() }] }),
      });
      expect(res.status).toBe(200);
      const got = events(await res.text());
      expect(got[0]).toMatchObject({ event: 'message_start', data: { message: { provider: 'anthropic', route: 'standby_a' } } });
      expect(got.at(-1)!.event).toBe('message_stop');
      const row = await until(async () => (await g.database.db.select().from(requestLogs).where(eq(requestLogs.id, res.headers.get('x-gw-request-id')!)))[0], 'the log row');
      expect(row).toMatchObject({ endpoint: 'messages', status: 200, provider: 'anthropic', stream: true });
      expect(row.attempts.length).toBeGreaterThanOrEqual(2);
    } finally {
      await g.close();
    }
  });

  it('sends Anthropic only the anthropic-beta features its connection allows', async () => {
    const g = await startChatFixture();
    try {
      const conn = await g.client.post('/provider_connections', {
        kind: 'anthropic', name: 'betas', secret: 'sk-sandbox-test',
        config: { base_url: `${g.sandbox.url}/anthropic/v1`, anthropic_betas: ['prompt-caching-2024-07-31'] },
      });
      expect(conn.status).toBe(201);
      await g.settle();
      const key = await g.key();
      const res = await fetch(`${g.api.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'anthropic-beta': 'prompt-caching-2024-07-31, files-api-2025-04-14', 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
        body: JSON.stringify({ model: 'anthropic/claude-3-5-haiku-latest', max_tokens: 50, messages: [{ role: 'user', content: fresh() }] }),
      });
      expect(res.status).toBe(200);
      expect(g.sandbox.received.at(-1)!.headers['anthropic-beta']).toBe('prompt-caching-2024-07-31');
      const bad = await g.client.post('/provider_connections', { kind: 'anthropic', name: 'bad betas', secret: 'sk-sandbox-test', config: { base_url: `${g.sandbox.url}/anthropic/v1`, anthropic_betas: ['Not A Beta!'] } });
      expect(bad.status).toBe(400);
    } finally {
      await g.close();
    }
  });

  it('ends a stream cut mid-answer with the Messages error event, no message_stop, and settles what was sent', async () => {
    const res = await messages(secret, { stream: true, messages: [{ role: 'user', content: `${fresh('Tell a story')} [sandbox cut_after=2]` }] });
    expect(res.status).toBe(200);
    const got = events(res.text);
    expect(got[0]!.event).toBe('message_start');
    expect(got.some((e) => e.event === 'content_block_delta')).toBe(true);
    expect(got.at(-1)).toMatchObject({ event: 'error', data: { type: 'error', error: { type: 'api_error', gateway_type: 'upstream_error' } } });
    expect(got.some((e) => e.event === 'message_stop')).toBe(false);
    const row = await logRow(res.id);
    expect(row).toMatchObject({ endpoint: 'messages', status: 502, errorType: 'upstream_error' });
    // The provider started answering, so the prompt and what was sent are charged.
    expect(Number(row.cost)).toBeGreaterThan(0);
  });

  it('settles a stream whose client hangs up after the first token at what was relayed, logged 499', async () => {
    const key = await f.key({ credit_limit: { amount: 100, period: 'daily' } });
    const gone = new AbortController();
    const res = await fetch(`${f.api.url}/v1/messages`, {
      method: 'POST', signal: gone.signal,
      headers: { 'x-api-key': key, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', max_tokens: 5000, stream: true, messages: [{ role: 'user', content: `${fresh()} [sandbox words=3000]` }] }),
    });
    const reader = res.body!.getReader();
    let received = '';
    while (!received.includes('content_block_delta')) received += new TextDecoder().decode((await reader.read()).value);
    gone.abort();
    await reader.cancel().catch(() => undefined);
    const row = await logRow(res.headers.get('x-gw-request-id')!);
    expect(row).toMatchObject({ endpoint: 'messages', status: 499 });
    expect((row.usage as Loose).completion_tokens).toBeGreaterThan(0);
    expect(Number(row.cost)).toBeGreaterThan(0);
    const usage = await until(async () => {
      const info = await (await fetch(`${f.api.url}/v1/key`, { headers: { 'x-api-key': key } })).json() as Loose;
      return info.usage > 0 && info.usage;
    }, 'the key\'s settled spend');
    expect(usage).toBeCloseTo(Number(row.cost), 9);
  });

  it('hits the cache on the second of two identical requests', async () => {
    const current = await f.client.get<Loose>('/org_settings');
    expect((await f.client.patch('/org_settings', { response_cache: { enabled: true, default_ttl_seconds: 600 } }, current.etag!)).status).toBe(200);
    await f.settle();
    const body = { messages: [{ role: 'user', content: fresh() }] };
    const first = await messages(secret, body);
    expect(first.headers.get('x-gw-cache')).toBe('MISS');
    await until(async () => {
      const again = await messages(secret, body);
      return again.headers.get('x-gw-cache') === 'HIT' && again;
    }, 'a cache hit').then((hit) => {
      expect(hit.json).toMatchObject({ type: 'message', content: first.json.content, usage: { cost: 0, price_source: 'gateway_cache' } });
      expect(hit.headers.get('x-gw-cache-source')).toBe(first.id);
    });
    const streamed = await messages(secret, { ...body, stream: true });
    expect(streamed.headers.get('x-gw-cache')).toBe('HIT');
    const replay = events(streamed.text);
    expect(replay.map((e) => e.event)).toEqual(expect.arrayContaining(['message_start', 'content_block_delta', 'message_delta', 'message_stop']));
    expect(replay.filter((e) => e.event === 'content_block_delta').map((e) => e.data.delta.text).join('')).toBe(first.json.content[0].text);
    await f.client.patch('/org_settings', { response_cache: { enabled: false } }, (await f.client.get<Loose>('/org_settings')).etag!);
    await f.settle();
  });

  it('blocks a prompt a guardrail blocks, in Anthropic\'s error shape with the gateway\'s code', async () => {
    const key = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: 'guarded', project_id: f.tenant.projectId });
    const policy = await f.client.post('/guardrail_policies', { target: `key:${key.body.id}`, rules: [{ detector: 'keywords', stage: 'input', action: 'block', words: ['forbidden'] }] });
    expect(policy.status).toBe(201);
    await f.settle();
    const res = await messages(key.body.secret, { messages: [{ role: 'user', content: `${fresh()} forbidden` }] });
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ type: 'error', error: { type: 'permission_error', gateway_type: 'permission_denied', code: 'guardrail_blocked' } });
    expect(await logRow(res.id)).toMatchObject({ endpoint: 'messages', status: 403, errorCode: 'guardrail_blocked' });
  });

  it('sends a guarded request to Anthropic translated, so what a guardrail redacts never leaves', async () => {
    const key = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: 'redacting', project_id: f.tenant.projectId });
    expect((await f.client.post('/guardrail_policies', { target: `key:${key.body.id}`, rules: [{ detector: 'email', stage: 'input', action: 'redact' }] })).status).toBe(201);
    await f.settle();
    const res = await messages(key.body.secret, { model: 'anthropic/claude-3-5-haiku-latest', messages: [{ role: 'user', content: [{ type: 'text', text: `${fresh()} mail jane@example.com`, cache_control: { type: 'ephemeral' } }] }] });
    expect(res.status).toBe(200);
    const sent = JSON.stringify(f.sandbox.received.at(-1)!.body);
    expect(sent).not.toContain('jane@example.com');
    expect(res.json).toMatchObject({ type: 'message', provider: 'anthropic', guardrails: { action: 'redacted' } });
  });

  it('names `thinking` as dropped, the way a refused parameter is', async () => {
    const res = await messages(secret, { thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: fresh() }] });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gw-params-dropped')).toBe('thinking');
    expect(JSON.stringify(f.sandbox.received.at(-1)!.body)).not.toContain('thinking');
    expect(await logRow(res.id)).toMatchObject({ paramsDropped: ['thinking'] });
  });

  // Today's Messages request, as Claude Code sends it (issue 53).
  describe('system messages between turns, adaptive thinking, output_config and context_management', () => {
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
    const thinkingToday = { thinking: { type: 'adaptive', display: 'omitted' }, context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] } };

    it('keeps a system message a system message where it stands on the chat wire', async () => {
      const res = await messages(secret, { system: 'Be brief.', messages: [{ role: 'user', content: fresh() }, { role: 'system', content: [{ type: 'text', text: 'Answer in English.' }] }] });
      expect(res.status).toBe(200);
      const sent = f.sandbox.received.at(-1)!.body as Loose;
      expect(sent.messages).toEqual([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: expect.any(String) }, { role: 'system', content: 'Answer in English.' }]);
      expect(res.json.content[0].text).toMatch(/^Hello from the sandbox model gpt-4o-mini/);
    });

    it('refuses a system message holding anything but text, in Anthropic\'s shape', async () => {
      const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } };
      const res = await messages(secret, { messages: [{ role: 'user', content: fresh() }, { role: 'system', content: [image] }] });
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: '`system` messages hold only `text` blocks.' } });
      const bad = await messages(secret, { messages: [{ role: 'user', content: fresh() }], output_config: { effort: 'extreme' } });
      expect(bad.status).toBe(400);
      expect(bad.json.error.message).toContain('output_config.effort');
    });

    it('answers output_config.format with JSON fitting its schema, sent as a JSON-schema response format', async () => {
      const res = await messages(secret, { output_config: { format: { type: 'json_schema', schema } }, messages: [{ role: 'user', content: fresh('Which city?') }] });
      expect(res.status).toBe(200);
      expect((f.sandbox.received.at(-1)!.body as Loose).response_format).toEqual({ type: 'json_schema', json_schema: { name: 'output', schema } });
      expect(JSON.parse(res.json.content[0].text)).toEqual({ city: 'sandbox' });
    });

    it('sends output_config.effort as the reasoning effort of a model that reasons, and names it dropped for one that does not', async () => {
      const reasoning = await messages(secret, { model: 'openai/o3-mini', output_config: { effort: 'low' }, messages: [{ role: 'user', content: fresh() }] });
      expect(reasoning.status).toBe(200);
      expect(f.sandbox.received.at(-1)!.body).toMatchObject({ model: 'o3-mini', reasoning_effort: 'low' });
      expect(reasoning.headers.get('x-gw-params-dropped')).toBeNull();

      // gpt-4o-mini does not reason: OpenAI would refuse `reasoning_effort` (the sandbox does).
      const plain = await messages(secret, { output_config: { effort: 'high' }, ...thinkingToday, messages: [{ role: 'user', content: fresh() }] });
      expect(plain.status).toBe(200);
      const sent = f.sandbox.received.at(-1)!.body as Loose;
      expect(sent).not.toHaveProperty('reasoning_effort');
      expect(JSON.stringify(sent)).not.toMatch(/thinking|context_management|output_config/);
      expect(plain.headers.get('x-gw-params-dropped')).toBe('output_config.effort,thinking,context_management');
      expect(await logRow(plain.id)).toMatchObject({ paramsDropped: ['output_config.effort', 'thinking', 'context_management'] });
    });

    it('passes them to Anthropic as they came, thinking omitted as asked; context_management only with its beta', async () => {
      const today = { model: 'anthropic/claude-3-5-haiku-latest', max_tokens: 2000, output_config: { effort: 'high' }, ...thinkingToday };
      const beta = { 'anthropic-beta': 'context-management-2025-06-27,effort-2025-11-24' };
      const res = await messages(secret, { ...today, messages: [{ role: 'user', content: fresh() }, { role: 'system', content: 'Answer in English.' }] }, beta);
      expect(res.status).toBe(200);
      const sent = f.sandbox.received.at(-1)!.body as Loose;
      expect(sent).toMatchObject({ thinking: today.thinking, output_config: today.output_config, messages: [{ role: 'user' }, { role: 'system', content: 'Answer in English.' }] });
      // This connection allows no beta: the field only a beta turns on is left out, and named.
      expect(sent).not.toHaveProperty('context_management');
      expect(res.headers.get('x-gw-params-dropped')).toBe('context_management');
      expect(res.json.content[0]).toMatchObject({ type: 'thinking', thinking: '', signature: expect.stringMatching(/^sandbox-signature-/) });
      expect(res.json.content[1].text).toMatch(/^Hello from the sandbox model /);

      const g = await startChatFixture();
      try {
        const conn = await g.client.post('/provider_connections', {
          kind: 'anthropic', name: 'context editing', secret: 'sk-sandbox-test',
          config: { base_url: `${g.sandbox.url}/anthropic/v1`, anthropic_betas: ['context-management-2025-06-27'] },
        });
        expect(conn.status).toBe(201);
        await g.settle();
        const key = await g.key();
        const allowed = await g.post('/v1/messages', { ...today, messages: [{ role: 'user', content: fresh() }] }, { 'x-api-key': key, ...beta });
        expect(allowed.status).toBe(200);
        expect(allowed.headers.get('x-gw-params-dropped')).toBeNull();
        expect(g.sandbox.received.at(-1)!.body).toMatchObject({ context_management: today.context_management });
        expect(g.sandbox.received.at(-1)!.headers['anthropic-beta']).toBe('context-management-2025-06-27');
      } finally {
        await g.close();
      }
    });

    it('sends a guarded request to Anthropic without the translated effort, named dropped', async () => {
      const key = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: 'guarded effort', project_id: f.tenant.projectId });
      expect((await f.client.post('/guardrail_policies', { target: `key:${key.body.id}`, rules: [{ detector: 'email', stage: 'input', action: 'redact' }] })).status).toBe(201);
      await f.settle();
      // Translated (guardrails check the chat body): Anthropic would refuse a `reasoning_effort` it does not know.
      const res = await messages(key.body.secret, { model: 'anthropic/claude-3-5-haiku-latest', output_config: { effort: 'low' }, messages: [{ role: 'user', content: fresh() }, { role: 'system', content: 'Be brief.' }] });
      expect(res.status).toBe(200);
      const sent = f.sandbox.received.at(-1)!.body as Loose;
      expect(sent).not.toHaveProperty('reasoning_effort');
      expect(sent.system).toBe('Be brief.');
      expect(res.headers.get('x-gw-params-dropped')).toBe('output_config.effort');
    });

    it('counts the tokens of such a request', async () => {
      const res = await f.post('/v1/messages/count_tokens?beta=true', {
        model: 'openai/gpt-4o-mini', output_config: { effort: 'high' }, ...thinkingToday,
        messages: [{ role: 'user', content: 'Say hello to the whole wide world' }, { role: 'system', content: 'Be brief.' }],
      }, { 'x-api-key': secret, 'anthropic-beta': 'token-counting-2024-11-01' });
      expect(res.status).toBe(200);
      expect(res.json.input_tokens).toBeGreaterThan(0);
    });
  });

  it('translates tool results, images and stop sequences to the chat wire', async () => {
    const res = await messages(secret, {
      system: [{ type: 'text', text: 'Be brief.' }],
      stop_sequences: ['END'],
      top_k: 5,
      metadata: { user_id: 'end-user-7' },
      messages: [
        { role: 'user', content: [{ type: 'text', text: fresh('Look') }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'x' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'found' }] },
      ],
      tools: [{ name: 'lookup', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }],
    });
    expect(res.status).toBe(200);
    const sent = f.sandbox.received.at(-1)!.body as Loose;
    expect(sent.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(sent.messages[1].content[1]).toEqual({ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } });
    expect(sent.messages[2].tool_calls[0]).toMatchObject({ id: 'toolu_1', function: { name: 'lookup', arguments: '{"q":"x"}' } });
    expect(sent.messages[3]).toEqual({ role: 'tool', tool_call_id: 'toolu_1', content: 'found' });
    expect(sent).toMatchObject({ stop: ['END'], user: 'end-user-7', max_tokens: 200 });
    // OpenAI has no `top_k`: dropped and named, as on chat completions.
    expect(res.headers.get('x-gw-params-dropped')).toBe('top_k');
    expect(await logRow(res.id)).toMatchObject({ userId: 'end-user-7' });
  });
});
