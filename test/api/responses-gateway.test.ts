import { eq } from 'drizzle-orm';
import { requestLogs, storedResponses } from '../../core/db/schema';
import { namedEvents, startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress } from '../helpers/harness';
import { until } from '../helpers/until';

/**
 * What the gateway does for chat applies to `POST /v1/responses` unchanged (issue 35): failover
 * before the first byte, a cut stream ending with the Responses `error` event, the cache,
 * guardrails, and spend settled and logged.
 */
describe('OpenAI Responses through the one chat call', () => {
  let f: ChatFixture;
  let secret: string;
  let seq = 0;
  const fresh = (text = 'Say hello') => `${text} #${Date.now()}-${seq++}`;

  const responses = (key: string, body: Record<string, unknown>, api = f) =>
    api.post('/v1/responses', { model: 'openai/gpt-4o-mini', ...body }, { authorization: `Bearer ${key}` });
  const events = namedEvents;
  const logRow = (api: ChatFixture, id: string) => until(async () => (await api.database.db.select().from(requestLogs).where(eq(requestLogs.id, id)))[0], `request-log row ${id}`);

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    // A wire that takes chat completions only: what is sent to it is the translation.
    await f.connect('azure_openai', { extra: { model_map: { 'gpt-4o-mini': 'gpt-4o-mini' } } });
    secret = await f.key();
  });
  afterAll(() => f.close());

  it('fails over to a fallback before the first byte, streamed', async () => {
    const g = await startChatFixture();
    try {
      await g.connect('openai', { directives: 'status=500', name: 'broken openai' });
      await g.connect('anthropic', { name: 'good anthropic' });
      const res = await responses(await g.key(), { stream: true, fallbacks: ['anthropic/claude-3-5-haiku-latest'], input: fresh() }, g);
      expect(res.status).toBe(200);
      const got = events(res.text);
      expect(got.at(-1)).toMatchObject({ event: 'response.completed', data: { response: { provider: 'anthropic', route: 'standby_a', status: 'completed' } } });
      expect(got.map((e) => e.data.sequence_number)).toEqual(got.map((_, i) => i));
      expect(await logRow(g, res.id)).toMatchObject({ endpoint: 'responses', status: 200, provider: 'anthropic' });
    } finally {
      await g.close();
    }
  });

  it('ends a stream cut mid-answer with the error event, no response.completed, and charges what was sent', async () => {
    // OpenAI's own Responses wire, passed through: its cut ends with the gateway's error event all the same.
    const res = await responses(secret, { stream: true, routing: { providers: { allow: ['openai'] } }, input: `${fresh('Tell a story')} [sandbox cut_after=2]` });
    const got = events(res.text);
    expect(got.some((e) => e.event === 'response.output_text.delta')).toBe(true);
    expect(got.at(-1)).toMatchObject({ event: 'error', data: { type: 'error', code: expect.any(String), message: expect.any(String) } });
    expect(got.some((e) => e.event === 'response.completed')).toBe(false);
    const row = await logRow(f, res.id);
    expect(row).toMatchObject({ endpoint: 'responses', status: 502 });
    expect(Number(row.cost)).toBeGreaterThan(0);
  });

  it('settles a stream whose client hangs up after the first token at what was relayed, logged 499', async () => {
    const key = await f.key({ credit_limit: { amount: 100, period: 'daily' } });
    const gone = new AbortController();
    const res = await fetch(`${f.api.url}/v1/responses`, {
      method: 'POST', signal: gone.signal,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', stream: true, routing: { providers: { allow: ['openai'] } }, input: `${fresh()} [sandbox words=3000]` }),
    });
    const reader = res.body!.getReader();
    let received = '';
    while (!received.includes('response.output_text.delta')) received += new TextDecoder().decode((await reader.read()).value);
    gone.abort();
    await reader.cancel().catch(() => undefined);
    const row = await logRow(f, res.headers.get('x-gw-request-id')!);
    expect(row).toMatchObject({ endpoint: 'responses', status: 499 });
    expect((row.usage as Loose).completion_tokens).toBeGreaterThan(0);
    const usage = await until(async () => {
      const info = await (await fetch(`${f.api.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } })).json() as Loose;
      return info.usage > 0 && info.usage;
    }, 'the key\'s settled spend');
    expect(usage).toBeCloseTo(Number(row.cost), 9);
  });

  it('hits the cache on the second of two identical requests', async () => {
    const current = await f.client.get<Loose>('/org_settings');
    expect((await f.client.patch('/org_settings', { response_cache: { enabled: true, default_ttl_seconds: 600 } }, current.etag!)).status).toBe(200);
    await f.settle();
    const input = fresh();
    const first = await responses(secret, { input });
    expect(first.headers.get('x-gw-cache')).toBe('MISS');
    const hit = await until(async () => {
      const again = await responses(secret, { input });
      return again.headers.get('x-gw-cache') === 'HIT' && again;
    }, 'a cache hit');
    expect(hit.json).toMatchObject({ object: 'response', output: [{ type: 'message', content: first.json.output[0].content }], usage: { cost: 0, price_source: 'gateway_cache' } });
    await f.client.patch('/org_settings', { response_cache: { enabled: false } }, (await f.client.get<Loose>('/org_settings')).etag!);
    await f.settle();
  });

  it('blocks a prompt a guardrail blocks, 403 guardrail_blocked, logged', async () => {
    const key = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: 'guarded', project_id: f.tenant.projectId });
    expect((await f.client.post('/guardrail_policies', { target: `key:${key.body.id}`, rules: [{ detector: 'keywords', stage: 'input', action: 'block', words: ['forbidden'] }] })).status).toBe(201);
    await f.settle();
    const res = await responses(key.body.secret, { input: `${fresh()} forbidden` });
    expect(res.status).toBe(403);
    expect(res.json.error).toMatchObject({ type: 'permission_denied', code: 'guardrail_blocked' });
    expect(await logRow(f, res.id)).toMatchObject({ endpoint: 'responses', status: 403, errorCode: 'guardrail_blocked' });
  });

  it('translates input items, instructions and max_output_tokens to the chat wire', async () => {
    const res = await responses(secret, {
      routing: { providers: { allow: ['azure_openai'] } },
      instructions: 'Be brief.',
      max_output_tokens: 3,
      input: [
        { role: 'user', content: [{ type: 'input_text', text: fresh('Look') }, { type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=' }] },
        { type: 'function_call', call_id: 'call_1', name: 'lookup', arguments: '{"q":"x"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'found' },
      ],
      tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } }],
    });
    expect(res.status).toBe(200);
    const sent = f.sandbox.received.at(-1)!.body as Loose;
    expect(sent.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(sent.messages[1].content[1]).toEqual({ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } });
    expect(sent.messages[2]).toMatchObject({ role: 'assistant', tool_calls: [{ id: 'call_1', function: { name: 'lookup', arguments: '{"q":"x"}' } }] });
    expect(sent.messages[3]).toEqual({ role: 'tool', tool_call_id: 'call_1', content: 'found' });
    expect(sent.max_tokens).toBe(3);
    // Three words of "The tool said: found": cut at the cap.
    expect(res.json).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
  });

  /** A request as the Codex CLI and the current `openai` SDK send it: every kind of tool and input item the Responses API takes. */
  const currentShapes = (input: string) => ({
    instructions: null,
    input: [
      { type: 'message', id: 'msg_dev', role: 'developer', content: [{ type: 'input_text', text: 'You are a coding agent.' }] },
      { type: 'message', id: 'msg_user', role: 'user', content: [{ type: 'input_text', text: input }, { type: 'input_file', file_id: 'file_1' }] },
      { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'x' } },
      { type: 'custom_tool_call', id: 'ctc_1', call_id: 'call_c', name: 'apply_patch', input: '*** Begin Patch' },
      { type: 'custom_tool_call_output', call_id: 'call_c', output: 'done' },
      { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'opaque' },
      { type: 'function_call', id: 'fc_1', call_id: 'call_f', name: 'lookup', arguments: '{"q":"x"}', status: 'completed' },
      { type: 'function_call_output', call_id: 'call_f', output: 'found' },
    ],
    tools: [
      { type: 'function', name: 'lookup', strict: false, parameters: { type: 'object', properties: { q: { type: 'string' } } } },
      { type: 'namespace', name: 'agents', description: 'Sub-agents.', tools: [{ type: 'function', name: 'spawn', parameters: { type: 'object', properties: {} } }] },
      { type: 'web_search', external_web_access: false },
      { type: 'custom', name: 'apply_patch', description: 'Applies a patch.', format: { type: 'text' } },
    ],
    tool_choice: 'auto', parallel_tool_calls: true,
    reasoning: { summary: 'auto' }, include: ['reasoning.encrypted_content'], text: { verbosity: 'low' },
    prompt_cache_key: 'session-1', client_metadata: { session_id: 'session-1' },
    store: false, stream: false,
  });

  it('sends OpenAI every tool and input item of the current API as they came', async () => {
    const request = currentShapes(fresh('Look'));
    const res = await responses(secret, { ...request, routing: { providers: { allow: ['openai'] } } });
    expect(res.status).toBe(200);
    const sent = f.sandbox.received.at(-1)!;
    expect(sent.path).toBe('/openai/v1/responses');
    // As it came, but for the connection's model name and the whole answer asked for without `stream`.
    const { stream: _whole, ...asSent } = request;
    expect(sent.body).toEqual({ ...asSent, model: 'gpt-4o-mini' });
    expect(res.headers.get('x-gw-params-dropped')).toBeNull();
    expect(res.json.output.at(-1).content[0].text).toBe('The tool said: found');
  });

  it('leaves a tool type OpenAI does not take for OpenAI to refuse', async () => {
    const res = await responses(secret, { routing: { providers: { allow: ['openai'] } }, input: fresh(), tools: [{ type: 'web_search' }, { type: 'telepathy' }] });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ type: 'invalid_request_error', message: expect.stringContaining("Invalid value for 'tools[1].type': 'telepathy'") });
    expect(f.sandbox.received.at(-1)!.body).toMatchObject({ tools: [{ type: 'web_search' }, { type: 'telepathy' }] });
  });

  it('translates what a chat wire carries (developer as system, function tools) and names the rest', async () => {
    const res = await responses(secret, { ...currentShapes(fresh('Look')), routing: { providers: { allow: ['azure_openai'] } } });
    expect(res.status).toBe(200);
    const sent = f.sandbox.received.at(-1)!.body as Loose;
    expect(sent.messages.map((m: Loose) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(sent.messages[0]).toEqual({ role: 'system', content: 'You are a coding agent.' });
    expect(sent.messages[1].content).toMatch(/^Look/);
    expect(sent.tools).toEqual([{ type: 'function', function: { name: 'lookup', strict: false, parameters: { type: 'object', properties: { q: { type: 'string' } } } } }]);
    expect(sent).toMatchObject({ tool_choice: 'auto', parallel_tool_calls: true });
    expect(res.headers.get('x-gw-params-dropped')!.split(',').sort()).toEqual([
      'client_metadata', 'include', 'input:custom_tool_call', 'input:custom_tool_call_output', 'input:input_file', 'input:web_search_call',
      'prompt_cache_key', 'reasoning', 'text.verbosity', 'tools:custom', 'tools:namespace', 'tools:web_search',
    ]);
    expect(res.json.output[0].content[0].text).toBe('The tool said: found');
  });

  it('sends a chat wire no tool settings when none of the tools offered crosses', async () => {
    const res = await responses(secret, {
      routing: { providers: { allow: ['azure_openai'] } }, input: fresh(),
      tools: [{ type: 'web_search' }], tool_choice: 'required', parallel_tool_calls: false,
    });
    expect(res.status).toBe(200);
    const sent = f.sandbox.received.at(-1)!.body as Loose;
    expect(sent.tools).toBeUndefined();
    expect(sent.tool_choice).toBeUndefined();
    expect(sent.parallel_tool_calls).toBeUndefined();
    expect(res.headers.get('x-gw-params-dropped')).toBe('tools:web_search,tool_choice');
    // A choice of a built-in tool does not cross either.
    const choice = await responses(secret, { routing: { providers: { allow: ['azure_openai'] } }, input: fresh(), tools: [{ type: 'function', name: 'lookup' }], tool_choice: { type: 'web_search_preview' } });
    expect(choice.status).toBe(200);
    expect((f.sandbox.received.at(-1)!.body as Loose).tool_choice).toBeUndefined();
    expect(choice.headers.get('x-gw-params-dropped')).toBe('tool_choice');
  });

  it('prices a priority or flex tier sent to OpenAI\'s own /responses as unknown, as chat does: refused under a blocking limit, unpriced without one', async () => {
    const limited = await f.key({ credit_limit: { amount: 5, period: 'monthly' } });
    for (const tier of ['priority', 'flex']) {
      const refused = await responses(limited, { input: fresh(), service_tier: tier });
      expect([tier, refused.status, refused.json.error?.code]).toEqual([tier, 402, 'unpriced_model_under_budget']);
      expect(refused.json.error?.message).toContain('service_tier');
      const served = await responses(secret, { input: fresh(), service_tier: tier });
      expect([tier, served.status, served.json.usage?.cost]).toEqual([tier, 200, null]);
    }
    const standard = await responses(limited, { input: fresh(), service_tier: 'default' });
    expect([standard.status, standard.json.usage?.cost > 0]).toEqual([200, true]);
  });

  it('takes a type named like a member every object has (constructor, toString, __proto__) as any other type it does not translate', async () => {
    const azure = { routing: { providers: { allow: ['azure_openai'] } } };
    const tool = await responses(secret, { ...azure, input: fresh(), tools: [{ type: 'constructor' }, { type: 'function', name: 'lookup' }] });
    expect(tool.status).toBe(200);
    expect(tool.headers.get('x-gw-params-dropped')).toBe('tools:constructor');
    const part = await responses(secret, { ...azure, input: [{ role: 'user', content: [{ type: 'toString' }, { type: 'input_text', text: fresh() }] }] });
    expect(part.status).toBe(200);
    const item = await responses(secret, { ...azure, input: [{ type: '__proto__' }, { role: 'user', content: fresh() }] });
    expect(item.status).toBe(200);
  });

  it('refuses a function tool, message or tool without what the translation reads, naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ input: 'Hi', tools: [{ type: 'web_search' }, { type: 'function', description: 'no name' }] }, 'Invalid `tools.1.name`'],
      [{ input: 'Hi', tools: [{ name: 'untyped' }] }, 'Invalid `tools.0.type`'],
      [{ input: [{ type: 'message', role: 'robot', content: 'Hi' }] }, 'Invalid `input.0.role`'],
      [{ input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, 'Invalid `input.0.content.0.text`'],
      [{ input: [{ type: 'function_call', call_id: 'c', name: 'f' }] }, 'Invalid `input.0.arguments`'],
      [{ input: 'Hi', tool_choice: { name: 'lookup' } }, 'Invalid `tool_choice`'],
    ];
    for (const [body, message] of cases) {
      const res = await responses(secret, body);
      expect({ status: res.status, type: res.json.error?.type, message: res.json.error?.message }).toEqual({ status: 400, type: 'invalid_request_error', message: expect.stringContaining(message) });
    }
  });

  describe('kept responses (store)', () => {
    let g: ChatFixture;
    const settings = async (patch: Record<string, unknown>) => {
      const current = await g.client.get<Loose>('/org_settings');
      expect((await g.client.patch('/org_settings', patch, current.etag!)).status).toBe(200);
      await g.settle();
    };
    const keyOf = async (settingsOf: Record<string, unknown> = {}) => (await g.client.post<{ id: string; secret: string }>('/gateway_keys', { label: `resp ${seq++}`, project_id: g.tenant.projectId, ...settingsOf })).body;
    const read = (key: string, id: string) => fetch(`${g.api.url}/v1/responses/${id}`, { headers: { authorization: `Bearer ${key}` } });

    beforeAll(async () => {
      g = await startChatFixture();
      await g.connect('openai');
      await settings({ prompt_logging_enabled: true });
    });
    afterAll(() => g.close());

    it('keeps nothing where the organization keeps no prompts, or the request says logging: false', async () => {
      const key = await keyOf();
      const unlogged = await responses(key.secret, { input: fresh(), logging: false }, g);
      expect(unlogged.json.store).toBe(false);
      expect((await read(key.secret, unlogged.json.id)).status).toBe(404);
      await settings({ prompt_logging_enabled: false });
      try {
        const res = await responses(key.secret, { input: fresh(), store: true }, g);
        expect(res.json.store).toBe(false);
        expect((await read(key.secret, res.json.id)).status).toBe(404);
      } finally {
        await settings({ prompt_logging_enabled: true });
      }
    });

    it('lets only keys whose reach covers the maker read or continue it; a rotated key keeps it', async () => {
      const maker = await keyOf();
      const first = await responses(maker.secret, { input: fresh('My secret is zebra-quartz.') }, g);
      expect(first.json.store).toBe(true);
      const id = first.json.id;

      const other = await keyOf();
      expect((await read(other.secret, id)).status).toBe(404);
      const continued = await responses(other.secret, { input: 'What is my secret?', previous_response_id: id }, g);
      expect(continued.status).toBe(404);
      expect(continued.json.error).toMatchObject({ type: 'not_found', param: 'previous_response_id' });
      expect(JSON.stringify(continued.json)).not.toContain('zebra-quartz');

      // The request log's body rule: the organization's reach reads others' prompts only with payload_access.
      const organization = await keyOf({ observability_access: 'organization' });
      expect((await read(organization.secret, id)).status).toBe(404);
      expect((await responses(organization.secret, { input: 'And?', previous_response_id: id }, g)).status).toBe(404);
      const payload = await keyOf({ observability_access: 'organization', payload_access: true });
      expect((await read(payload.secret, id)).status).toBe(200);
      expect((await responses(payload.secret, { input: 'And?', previous_response_id: id }, g)).status).toBe(200);

      const rotated = await g.client.post<{ secret: string }>(`/gateway_keys/${maker.id}/rotate`, { overlap_seconds: 0 });
      expect(rotated.status).toBe(200);
      await g.settle();
      const after = await read(rotated.body.secret, id);
      expect(after.status).toBe(200);
      expect(await after.json()).toMatchObject({ id, object: 'response', status: 'completed', store: true });
    });

    it('continues a function-tool turn by previous_response_id with only the tool output as input', async () => {
      const key = await keyOf();
      const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } }];
      const first = await responses(key.secret, { input: fresh('Look it up'), tools }, g);
      const call = first.json.output.find((o: Loose) => o.type === 'function_call');
      expect(call).toBeTruthy();
      const second = await responses(key.secret, { previous_response_id: first.json.id, tools, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'found it' }] }, g);
      expect(second.status).toBe(200);
      expect(second.json.output[0].content[0].text).toContain('found it');
    });

    it('reads as gone once older than the prompt retention, and can be deleted', async () => {
      const key = await keyOf();
      const res = await responses(key.secret, { input: fresh() }, g);
      const id = res.json.id;
      await g.database.db.update(storedResponses).set({ createdAt: new Date(Date.now() - 31 * 86_400_000) }).where(eq(storedResponses.id, id));
      expect((await read(key.secret, id)).status).toBe(404);
      await settings({ prompt_logging_retention_days: 90 });
      try {
        expect((await read(key.secret, id)).status).toBe(200);
      } finally {
        await settings({ prompt_logging_retention_days: 30 });
      }
      const removed = await fetch(`${g.api.url}/v1/responses/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key.secret}` } });
      expect(await removed.json()).toEqual({ id, object: 'response', deleted: true });
      expect((await g.database.db.select().from(storedResponses).where(eq(storedResponses.id, id))).length).toBe(0);
    });
  });
});
