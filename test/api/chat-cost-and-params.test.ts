import { eq } from 'drizzle-orm';
import { requestLogs } from '../../core/db/schema';
import { sseData, startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { manageClient } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';

/**
 * Cost by source, checked against figures computed by hand from the sandbox's word-count
 * usage ("Say hello" = 2 prompt tokens; "Hello from the sandbox model <model>." = 6 tokens),
 * then parameters, the request log and /v1/models.
 */
describe('chat cost, parameters, request log and models', () => {
  let f: ChatFixture;
  let secret: string;
  const hello = [{ role: 'user', content: 'Say hello' }];

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    await f.connect('anthropic');
    await f.connect('google');
    secret = await f.key();
  });
  afterAll(() => f.close());

  const lastBody = () => f.sandbox.received.at(-1)!.body!;

  describe('cost and price_source', () => {
    it('list: gpt-4o-mini at $0.15 in / $0.60 out per million', async () => {
      const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello });
      expect(res.json.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 6, price_source: 'list' });
      expect(res.json.usage.cost).toBeCloseTo((2 * 0.15 + 6 * 0.6) / 1e6, 12);
    });

    it('list with cached input: cached tokens at $0.075 per million', async () => {
      const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello [sandbox cached=2]' }] });
      // "Say hello [sandbox cached=2]" is 4 words, 2 of them cached.
      expect(res.json.usage).toMatchObject({ prompt_tokens: 4, prompt_tokens_details: { cached_tokens: 2 } });
      expect(res.json.usage.cost).toBeCloseTo((2 * 0.15 + 2 * 0.075 + 6 * 0.6) / 1e6, 12);
    });

    it('list for Anthropic, cached reads apart: claude-3-5-haiku at $0.80 / $0.08 cached / $4 out', async () => {
      const res = await f.chat(secret, { model: 'anthropic/claude-3-5-haiku-latest', messages: [{ role: 'user', content: 'Say hello [sandbox cached=1]' }] });
      expect(res.json.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 6, prompt_tokens_details: { cached_tokens: 1 }, price_source: 'list' });
      expect(res.json.usage.cost).toBeCloseTo((3 * 0.8 + 1 * 0.08 + 6 * 4) / 1e6, 12);
    });

    it('list for Anthropic, cache writes at their own rates: claude-3-5-haiku writes $1.00 for 5 minutes, $1.60 for an hour (issue 54)', async () => {
      const content = 'Say hello to everyone in the room today please [sandbox cache_write=3 cache_write_1h=2]';
      const res = await f.chat(secret, { model: 'anthropic/claude-3-5-haiku-latest', messages: [{ role: 'user', content }] });
      // 12 words: 7 plain input, 3 written for 5 minutes, 2 for an hour; the writes never reach the client's usage.
      expect(res.json.usage).toMatchObject({ prompt_tokens: 12, price_source: 'list' });
      expect(res.json.usage).not.toHaveProperty('cache_write_tokens');
      expect(res.json.usage.cost).toBeCloseTo((7 * 0.8 + 3 * 1 + 2 * 1.6 + res.json.usage.completion_tokens * 4) / 1e6, 12);
      // A customer's own input rate: writes at 1.25x and 2x of it.
      const f2 = await startChatFixture();
      try {
        await f2.connect('anthropic');
        expect((await f2.client.post('/model_prices', { model: 'claude-3-5-haiku-latest', input_per_million: 10, output_per_million: 20 })).status).toBe(201);
        await f2.settle();
        const custom = await f2.chat(await f2.key(), { model: 'anthropic/claude-3-5-haiku-latest', messages: [{ role: 'user', content }] });
        expect(custom.json.usage.price_source).toBe('custom');
        expect(custom.json.usage.cost).toBeCloseTo((7 * 10 + 3 * 12.5 + 2 * 20 + custom.json.usage.completion_tokens * 20) / 1e6, 12);
      } finally {
        await f2.close();
      }
    });

    it('provider: a cost the provider reports wins, also in cost_usd', async () => {
      const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi [sandbox report_cost=0.0042]' }] });
      expect(res.json.usage).toMatchObject({ cost: 0.0042, price_source: 'provider', cost_usd: 0.0042 });
    });

    it('custom, then custom_provider over it; reasoning tokens priced inside completion tokens', async () => {
      const f2 = await startChatFixture();
      try {
        await f2.connect('google');
        const key = await f2.key();
        const ask = () => f2.chat(key, { model: 'google/gemini-2.0-flash', messages: [{ role: 'user', content: 'Say hello [sandbox reasoning=2]' }] });
        expect((await f2.client.post('/model_prices', { model: 'gemini-2.0-flash', input_per_million: 10, output_per_million: 20 })).status).toBe(201);
        await f2.settle();
        const custom = await ask();
        // 4 prompt words; 6 completion tokens of which 2 reasoning.
        expect(custom.json.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 6, completion_tokens_details: { reasoning_tokens: 2 }, price_source: 'custom' });
        expect(custom.json.usage.cost).toBeCloseTo((4 * 10 + 6 * 20) / 1e6, 12);
        expect((await f2.client.post('/model_prices', { model: 'google/gemini-2.0-flash', provider: 'google', input_per_million: 1, output_per_million: 2, cached_input_per_million: 0.5 })).status).toBe(201);
        await f2.settle();
        const own = await ask();
        expect(own.json.usage).toMatchObject({ price_source: 'custom_provider' });
        expect(own.json.usage.cost).toBeCloseTo((4 * 1 + 6 * 2) / 1e6, 12);
      } finally {
        await f2.close();
      }
    });

    it('unpriced: cost null and no price_source', async () => {
      const res = await f.client.post<{ id: string }>('/provider_connections', {
        kind: 'custom', name: 'selfhosted', secret: 'sk-sandbox-x', config: { base_url: `${f.sandbox.url}/openai/v1` }, model_map: { 'house-model': 'house-model' },
      });
      expect(res.status).toBe(201);
      await f.settle();
      const answer = await f.chat(secret, { model: 'custom/house-model', messages: hello });
      expect(answer.status).toBe(200);
      expect(answer.json.usage.cost).toBeNull();
      expect(answer.json.usage).not.toHaveProperty('price_source');
    });

    it('puts the cost on the final usage chunk of a stream', async () => {
      const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, stream: true, stream_options: { include_usage: true } });
      const events = sseData(res.text);
      expect(events.at(-1)).toBe('[DONE]');
      const usage = events.at(-2) as Loose;
      expect(usage.choices).toEqual([]);
      expect(usage.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 6, price_source: 'list' });
      expect(usage.usage.cost).toBeCloseTo(3.9e-6, 12);
      const plain = sseData((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, stream: true })).text);
      expect(plain.some((e) => typeof e === 'object' && e.usage)).toBe(false);
    });
  });

  describe('parameters', () => {
    it('forwards unknown top-level fields, never the gateway extension fields', async () => {
      const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, foo_bar: { x: 1 }, metadata: { user_id: 'u1' }, logging: false, fallbacks: [] });
      expect(res.status).toBe(200);
      expect(lastBody()).toMatchObject({ foo_bar: { x: 1 }, model: 'gpt-4o-mini' });
      for (const field of ['metadata', 'logging', 'fallbacks', 'routing', 'cache']) expect(lastBody()).not.toHaveProperty(field);
    });

    it('drops sampling parameters a model refuses by rule, names them, and sends max_completion_tokens to reasoning models', async () => {
      const res = await f.chat(secret, { model: 'openai/o3-mini', messages: hello, temperature: 0.2, top_p: 0.5, max_tokens: 50 });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-gw-params-dropped')?.split(',').sort()).toEqual(['temperature', 'top_p']);
      expect(lastBody()).toMatchObject({ max_completion_tokens: 50 });
      expect(lastBody()).not.toHaveProperty('temperature');
      expect(lastBody()).not.toHaveProperty('max_tokens');
      const normal = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, temperature: 0.2 });
      expect(normal.headers.get('x-gw-params-dropped')).toBeNull();
      expect(lastBody()).toMatchObject({ temperature: 0.2 });
    });

    it('drops a parameter refused without a rule, retries once, and remembers', async () => {
      const conn = await f.connect('deepseek', { directives: 'refuse_param=seed' });
      const before = f.sandbox.received.length;
      const first = await f.chat(secret, { model: 'deepseek/deepseek-chat', messages: hello, seed: 7 });
      expect([first.status, first.json.connection, first.headers.get('x-gw-params-dropped')]).toEqual([200, conn, 'seed']);
      expect(f.sandbox.received.length - before).toBe(2);
      const second = await f.chat(secret, { model: 'deepseek/deepseek-chat', messages: hello, seed: 7 });
      expect(second.headers.get('x-gw-params-dropped')).toBe('seed');
      expect(f.sandbox.received.length - before).toBe(3);
      // A refused non-sampling parameter is the provider's 400, with the prefix.
      await f.connect('xai', { directives: 'refuse_param=response_format' });
      const refused = await f.chat(secret, { model: 'xai/grok-3', messages: hello, response_format: { type: 'json_object' } });
      expect([refused.status, refused.json.error?.type]).toEqual([400, 'invalid_request_error']);
      expect(refused.json.error.message).toMatch(/^Provider rejected the request: Unsupported parameter: 'response_format'/);
    });

    it('learns a refusal per connection: another organization\'s same model still gets the parameter', async () => {
      // Its own API process, so nothing learned here reaches the other tests.
      const f2 = await startChatFixture();
      try {
        // Organization 1's `openai` connection points at a server that refuses presence_penalty.
        const refusing = await f2.connect('openai', { directives: 'refuse_param=presence_penalty' });
        const refusingKey = await f2.key();
        const body = { model: 'openai/gpt-4o-mini', messages: hello, presence_penalty: 0.5 };
        const first = await f2.chat(refusingKey, body);
        expect([first.status, first.json.connection, first.headers.get('x-gw-params-dropped')]).toEqual([200, refusing, 'presence_penalty']);

        // Organization 2, same process, same kind and model, a server that takes it.
        const other = await createTenant(f2.database.db);
        const otherClient = manageClient(f2.api.url, other.token);
        const conn = await otherClient.post<{ id: string }>('/provider_connections', {
          kind: 'openai', name: 'plain', secret: 'sk-sandbox-other', config: { base_url: `${f2.sandbox.url}/openai/v1` },
        });
        expect(conn.status).toBe(201);
        await f2.settle();
        const before = f2.sandbox.received.length;
        const res = await f2.chat(other.key.secret, body);
        expect([res.status, res.json.connection, res.headers.get('x-gw-params-dropped')]).toEqual([200, conn.body.id, null]);
        const sent = f2.sandbox.received.slice(before);
        expect(sent).toHaveLength(1);
        expect(sent[0]!.body).toMatchObject({ presence_penalty: 0.5 });
        // Organization 1 keeps what it learned: no wasted call the second time.
        const again = f2.sandbox.received.length;
        expect((await f2.chat(refusingKey, body)).headers.get('x-gw-params-dropped')).toBe('presence_penalty');
        expect(f2.sandbox.received.length - again).toBe(1);
      } finally {
        await f2.close();
      }
    });

    it('sends Anthropic the required max_tokens (the model maximum when none is given) and its own shapes', async () => {
      await f.chat(secret, { model: 'anthropic/claude-3-5-haiku-latest', messages: [{ role: 'system', content: 'Be brief.' }, ...hello], stop: 'END', user: 'end-user-1', seed: 3 });
      const body = lastBody();
      expect(body.max_tokens).toEqual(expect.any(Number));
      expect(body).toMatchObject({ system: 'Be brief.', stop_sequences: ['END'], metadata: { user_id: 'end-user-1' } });
      expect(body).not.toHaveProperty('seed');
    });

    it('validates bounds of spec 4.1 with 400s', async () => {
      for (const bad of [{ temperature: 2.5 }, { stop: ['a', 'b', 'c', 'd', 'e'] }, { frequency_penalty: -3 }, { presence_penalty: 2.1 }, { messages: [] }]) {
        const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, ...bad });
        expect([JSON.stringify(bad), res.status]).toEqual([JSON.stringify(bad), 400]);
      }
      const attribution = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, metadata: { user_id: 42 } });
      expect([attribution.status, attribution.json.error?.code]).toEqual([400, 'invalid_attribution']);
      const ttl = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, cache: { ttl_seconds: 9_999_999 } });
      expect([ttl.status, ttl.json.error?.code]).toEqual([400, 'cache_ttl_too_long']);
      const header = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello }, { 'x-gw-cache-ttl': 'soon' });
      expect([header.status, header.json.error?.code]).toEqual([400, 'invalid_cache_control']);
    });

    it('refuses text Postgres cannot store (NUL, lone surrogate) in model and attribution fields with 400 naming the field, before any provider call (issue 33)', async () => {
      const before = f.sandbox.received.length;
      const cases: Array<[Record<string, unknown>, string, string]> = [
        [{ metadata: { user_id: 'user\u0000one' } }, 'invalid_attribution', 'metadata.user_id'],
        [{ metadata: { session_id: 'sess\ud800' } }, 'invalid_attribution', 'metadata.session_id'],
        [{ metadata: { tags: { team: 'a\u0000b' } } }, 'invalid_attribution', 'metadata.tags.team'],
        [{ metadata: { other: { deep: ['fine', 'lone\udc00'] } } }, 'invalid_attribution', 'metadata.other.deep.1'],
        [{ model: 'openai/gpt-4o-mini\u0000' }, 'invalid_request_error', '`model`'],
      ];
      for (const [extra, code, field] of cases) {
        const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, ...extra });
        const got = [res.status, res.json.error?.code ?? res.json.error?.type, (res.json.error?.message as string).includes(field)];
        expect([JSON.stringify(extra), ...got]).toEqual([JSON.stringify(extra), 400, code, true]);
      }
      expect(f.sandbox.received.length).toBe(before);
    });

    it('resolves bare names to the one connected vendor; several vendors is 400 ambiguous_model; unknown 404', async () => {
      expect((await f.chat(secret, { model: 'gpt-4o-mini', messages: hello })).json.provider).toBe('openai');
      const unknown = await f.chat(secret, { model: 'no-such-model-anywhere', messages: hello });
      expect([unknown.status, unknown.json.error?.code]).toEqual([404, 'model_not_found']);
      // A real vendor with a model no catalog knows is not sent upstream.
      const invented = await f.chat(secret, { model: 'openai/gpt-made-up-9', messages: hello });
      expect([invented.status, invented.json.error?.type, invented.json.error?.code]).toEqual([404, 'model_not_found', 'model_not_found']);
      const inventedFallback = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, fallbacks: ['anthropic/claude-made-up'] });
      expect([inventedFallback.status, inventedFallback.json.error?.code]).toEqual([400, 'unknown_fallback_model']);
      const notConnected = await f.chat(secret, { model: 'mistral/mistral-large-latest', messages: hello });
      expect([notConnected.status, notConnected.json.error?.code]).toEqual([503, 'no_provider_connected']);
      const f2 = await startChatFixture();
      try {
        await f2.connect('openai');
        await f2.connect('openrouter');
        await f2.connect('azure_openai');
        const key = await f2.key();
        const res = await f2.chat(key, { model: 'gpt-4o-mini', messages: hello });
        expect([res.status, res.json.error?.code]).toEqual([400, 'ambiguous_model']);
      } finally {
        await f2.close();
      }
    });

    it('enforces the key\'s model allowlist and environments', async () => {
      const narrow = await f.key({ model_allowlist: ['openai/gpt-4o'] });
      const refused = await f.chat(narrow, { model: 'openai/gpt-4o-mini', messages: hello });
      expect([refused.status, refused.json.error?.code]).toEqual([403, 'model_not_allowed']);
      expect((await f.chat(narrow, { model: 'openai/gpt-4o', messages: hello })).status).toBe(200);

      const staging = await f.key({ environment: 'staging' });
      const prodOnly = await f.connect('cerebras', { extra: { environments: ['production'] } });
      const out = await f.chat(staging, { model: 'cerebras/llama3.1-8b', messages: hello });
      expect([out.status, out.json.error?.code]).toEqual([503, 'connection_out_of_scope']);
      const prodKey = await f.key({ environment: 'production' });
      expect((await f.chat(prodKey, { model: 'cerebras/llama3.1-8b', messages: hello })).json.connection).toBe(prodOnly);
      const noEnv = await f.chat(secret, { model: 'cerebras/llama3.1-8b', messages: hello });
      expect(noEnv.json.error?.code).toBe('connection_out_of_scope');
    });
  });

  describe('spend limits', () => {
    const keyInfo = async (key: string) => (await (await fetch(`${f.api.url}/v1/key`, { headers: { authorization: `Bearer ${key}` } })).json()) as Loose;

    it('holds the worst case before sending: a limit is a ceiling, and GET /v1/key shows where it stands', async () => {
      // Output at $0.10 a token, input free; `max_tokens: 5` makes each answer (and its worst case) $0.50.
      expect((await f.client.post('/model_prices', { model: 'openai/gpt-4o', provider: 'openai', input_per_million: 0, output_per_million: 100_000 })).status).toBe(201);
      await f.settle();
      const ask = (key: string) => f.chat(key, { model: 'openai/gpt-4o', messages: hello, max_tokens: 5 });
      const daily = await f.key({ label: 'limited', credit_limit: { amount: 0.6, period: 'daily' } });
      const tomorrow = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1)).toISOString();
      expect(await keyInfo(daily)).toEqual({ label: 'limited', limit: 0.6, usage: 0, limit_remaining: 0.6, limit_period: 'daily', limit_resets_at: tomorrow });
      const first = await ask(daily);
      expect(first.json.usage).toMatchObject({ completion_tokens: 5, cost: 0.5, price_source: 'custom_provider' });
      await f.settle();
      expect(await keyInfo(daily)).toMatchObject({ usage: 0.5, limit_remaining: 0.1 });
      // $0.10 of room cannot hold another $0.50: refused before anything is sent.
      const refused = await ask(daily);
      expect([refused.status, refused.json.error?.type, refused.json.error?.code]).toEqual([402, 'budget_exceeded', 'key_budget']);
      expect(await keyInfo(daily)).toMatchObject({ usage: 0.5, limit_remaining: 0.1 });

      // A lifetime cap of $1.20 serves two $0.50 requests and refuses the third: usage never passes it.
      const lifetime = await f.key({ credit_limit: { amount: 1.2, period: 'never' } });
      expect((await ask(lifetime)).status).toBe(200);
      expect((await ask(lifetime)).status).toBe(200);
      const third = await ask(lifetime);
      expect([third.status, third.json.error?.code]).toEqual([402, 'key_lifetime_limit']);
      await f.settle();
      expect(await keyInfo(lifetime)).toMatchObject({ limit: 1.2, usage: 1, limit_remaining: 0.2, limit_period: 'never', limit_resets_at: null });

      const unlimited = await f.key();
      await ask(unlimited);
      await f.settle();
      expect(await keyInfo(unlimited)).toMatchObject({ limit: null, usage: 0.5, limit_remaining: null, limit_period: null, limit_resets_at: null });
    });

    it('refuses an unpriced model under a limit unless the organization allows unpriced traffic', async () => {
      const conn = await f.client.post<{ id: string }>('/provider_connections', { kind: 'custom', name: 'unpriced house', secret: 'sk-sandbox-x', config: { base_url: `${f.sandbox.url}/openai/v1` }, model_map: { 'house-2': 'house-2' } });
      expect(conn.status).toBe(201);
      await f.settle();
      const limited = await f.key({ credit_limit: { amount: 5, period: 'monthly' } });
      const refused = await f.chat(limited, { model: 'custom/house-2', messages: hello });
      expect([refused.status, refused.json.error?.code]).toEqual([402, 'unpriced_model_under_budget']);
      expect((await f.chat(await f.key(), { model: 'custom/house-2', messages: hello })).status).toBe(200);
      const settings = await f.client.get('/org_settings');
      expect((await f.client.patch('/org_settings', { unpriced_budget_policy: 'allow' }, settings.etag!)).status).toBe(200);
      await f.settle();
      expect((await f.chat(limited, { model: 'custom/house-2', messages: hello })).status).toBe(200);
      const now = await f.client.get('/org_settings');
      await f.client.patch('/org_settings', { unpriced_budget_policy: 'block' }, now.etag!);
      await f.settle();
    });
  });

  describe('fields that change the price (issue 33)', () => {
    it('holds and settles a web search at the price data\'s per-search price on top of the tokens', async () => {
      const plain = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Search me' }] });
      const searched = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Search me' }], web_search_options: {} });
      expect([plain.status, searched.status]).toEqual([200, 200]);
      // gpt-4o-mini: $10 per thousand searches, one search per request.
      expect(Math.round((searched.json.usage.cost - plain.json.usage.cost) * 1e9)).toBe(10_000_000);
    });

    it('prices a priority tier or audio output as unknown, never as text: unpriced without a limit, refused under one', async () => {
      const limited = await f.key({ credit_limit: { amount: 5, period: 'monthly' } });
      for (const [extra, named] of [[{ service_tier: 'priority' }, 'service_tier'], [{ modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } }, 'audio output']] as const) {
        const refused = await f.chat(limited, { model: 'openai/gpt-4o-mini', messages: hello, ...extra });
        expect([named, refused.status, refused.json.error?.code]).toEqual([named, 402, 'unpriced_model_under_budget']);
        expect(refused.json.error?.message).toContain(named);
        const served = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, ...extra });
        expect([named, served.status, served.json.usage?.cost]).toEqual([named, 200, null]);
      }
      // The standard tiers are the text price.
      const standard = await f.chat(limited, { model: 'openai/gpt-4o-mini', messages: hello, service_tier: 'default' });
      expect([standard.status, standard.json.usage.cost > 0]).toEqual([200, true]);
    });
  });

  describe('request log', () => {
    it('writes one row per request, with attempts, usage, cost and attribution, and no prompt unless prompt logging is on', async () => {
      const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello, metadata: { user_id: 'u-42', session_id: 's-1', tags: { team: 'search' } } });
      await f.api.runtime.deps.gateway.requestLog.flush();
      const [row] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, res.json.id));
      expect(row).toMatchObject({
        orgId: f.tenant.orgId, projectId: f.tenant.projectId, requestedModel: 'openai/gpt-4o-mini', provider: 'openai', connectionId: res.json.connection,
        status: 200, userId: 'u-42', sessionId: 's-1', tags: { team: 'search' }, priceSource: 'list', requestBody: null, responseBody: null,
      });
      expect(row!.cost).toBeCloseTo(3.9e-6, 12);
      expect(row!.attempts).toHaveLength(1);

      // Refusals are logged too, with their code.
      const failed = await f.chat(secret, { model: 'mistral/mistral-large-latest', messages: hello });
      expect(failed.status).toBe(503);
      await f.api.runtime.deps.gateway.requestLog.flush();
      const [refused] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, failed.headers.get('x-gw-request-id')!));
      expect(refused).toMatchObject({ status: 503, errorType: 'no_available_provider', errorCode: 'no_provider_connected', attempts: [] });
    });
  });

  describe('GET /v1/models', () => {
    it('lists what the calling key can call: connected vendors\' models and routes, narrowed by its allowlist', async () => {
      const list = async (key: string) => ((await (await fetch(`${f.api.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: Array<{ id: string; object: string; owned_by: string }> }).data;
      const all = await list(secret);
      expect(all.map((m) => m.id)).toEqual(expect.arrayContaining(['openai/gpt-4o-mini', 'anthropic/claude-3-5-haiku-20241022', 'google/gemini-2.0-flash']));
      expect(all[0]).toMatchObject({ object: 'model' });
      const narrow = await list(await f.key({ model_allowlist: ['openai/gpt-4o-mini'] }));
      expect(narrow.map((m) => m.id)).toEqual(['openai/gpt-4o-mini']);
      const anthropicOnly = await list(await f.key({ allowed_providers: ['anthropic'] }));
      expect(anthropicOnly.every((m) => m.owned_by === 'anthropic')).toBe(true);
    });
  });
});
