import { eq } from 'drizzle-orm';
import { organizations, requestLogs } from '../../core/db/schema';
import { sseData, startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

/**
 * The response cache (issue 12, spec 2.2, 4.1, 8) on the real API, Redis and Postgres, with the
 * sandbox as provider: every request that should reach the provider is counted there.
 */
describe('response cache', () => {
  let f: ChatFixture;
  let secret: string;
  let n = 0;
  /** A question no other test asks, so each test starts from an empty cache entry. */
  const fresh = () => [{ role: 'user', content: `Say hello ${Date.now()}-${n++}` }];
  const providerCalls = () => f.sandbox.received.filter((r) => r.path.endsWith('/chat/completions')).length;
  const logRow = async (id: string) => {
    for (let i = 0; i < 50; i++) {
      const [row] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, id));
      if (row) return row;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`no request log row ${id}`);
  };
  const setCache = async (value: Record<string, unknown>) => {
    const current = await f.client.get<Loose>('/org_settings');
    const res = await f.client.patch('/org_settings', { response_cache: value }, current.etag!);
    expect(res.status).toBe(200);
    await f.settle();
  };
  const redis = () => f.api.runtime.deps.redis;
  /** This run's keys matching a pattern, without the run's prefix (the client adds it back). */
  const redisKeys = async (pattern: string) => (await redis().redis.keys(`${redis().prefix}${pattern}`)).map((k) => k.slice(redis().prefix.length));

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    secret = await f.key();
    await setCache({ enabled: true, default_ttl_seconds: 600 });
  });
  afterAll(() => f.close());

  it('misses, then hits with every hit field and header, without calling the provider again', async () => {
    const messages = fresh();
    const first = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-gw-cache')).toBe('MISS');
    expect(first.json.cache).toEqual({ status: 'miss' });
    const calls = providerCalls();
    await f.settle();

    const second = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages });
    expect(second.status).toBe(200);
    expect(providerCalls()).toBe(calls);
    expect(second.headers.get('x-gw-cache')).toBe('HIT');
    expect(second.headers.get('x-gw-cache-source')).toBe(first.json.id);
    expect(second.headers.get('x-gw-cache-age')).toMatch(/^\d+$/);
    expect(second.json.id).not.toBe(first.json.id);
    expect(second.json.cache).toEqual({ status: 'hit', age_seconds: expect.any(Number), source_request_id: first.json.id, provider_billed: false });
    expect(second.json.choices).toEqual(first.json.choices);
    const { cost: _c, price_source: _p, ...counts } = first.json.usage;
    expect(second.json.usage).toEqual({ ...counts, cost: 0, price_source: 'gateway_cache' });
    for (const field of ['model', 'provider', 'connection', 'route', 'route_name', 'object']) expect(second.json[field]).toEqual(first.json[field]);
    // Counted toward the rate limit like any request.
    expect(Number(second.headers.get('x-ratelimit-remaining'))).toBeLessThan(Number(first.headers.get('x-ratelimit-remaining')));

    const row = await logRow(second.json.id);
    expect(row).toMatchObject({ status: 200, cost: 0, priceSource: 'gateway_cache', cacheStatus: 'hit', cacheSourceRequestId: first.json.id, provider: 'openai' });
    expect((await logRow(first.json.id)).cacheStatus).toBe('miss');
  });

  it('the key ignores stream and key order; other parameters and the model make other entries', async () => {
    const messages = fresh();
    await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, temperature: 0.5 });
    await f.settle();
    const reordered = await f.chat(secret, { temperature: 0.5, messages, model: 'openai/gpt-4o-mini', stream_options: undefined });
    expect(reordered.headers.get('x-gw-cache')).toBe('HIT');
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, temperature: 0.7 })).headers.get('x-gw-cache')).toBe('MISS');
    expect((await f.chat(secret, { model: 'openai/gpt-4o', messages, temperature: 0.5 })).headers.get('x-gw-cache')).toBe('MISS');
  });

  it('bypass neither reads nor writes; refresh skips the read and writes; read_only never writes', async () => {
    const messages = fresh();
    const bypass = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { mode: 'bypass' } });
    expect(bypass.headers.get('x-gw-cache')).toBe('BYPASS');
    expect(bypass.json.cache).toEqual({ status: 'bypass' });
    await f.settle();
    // Nothing was written by the bypass: read_only misses, and writes nothing either.
    const readOnly = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { mode: 'read_only' } });
    expect(readOnly.headers.get('x-gw-cache')).toBe('MISS');
    await f.settle();
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { mode: 'read_only' } })).headers.get('x-gw-cache')).toBe('MISS');

    const refresh = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages }, { 'x-gw-cache': 'refresh' });
    expect(refresh.headers.get('x-gw-cache')).toBe('MISS');
    await f.settle();
    const again = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages }, { 'x-gw-cache': 'refresh' });
    expect(again.headers.get('x-gw-cache')).toBe('MISS');
    await f.settle();
    // The second refresh replaced the entry: a read now serves it.
    const hit = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { mode: 'read_only' } });
    expect(hit.headers.get('x-gw-cache')).toBe('HIT');
    expect(hit.json.cache.source_request_id).toBe(again.json.id);
  });

  it('namespaces are separate; the body wins over the headers field by field', async () => {
    const messages = fresh();
    await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { namespace: 'team-a' } });
    await f.settle();
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { namespace: 'team-b' } })).headers.get('x-gw-cache')).toBe('MISS');
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages })).headers.get('x-gw-cache')).toBe('MISS');
    // Header says team-b, body says team-a: the body's namespace is used, the header's mode kept.
    const both = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { namespace: 'team-a' } }, { 'x-gw-cache-namespace': 'team-b', 'x-gw-cache': 'read_only' });
    expect(both.headers.get('x-gw-cache')).toBe('HIT');
    const bodyMode = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { mode: 'bypass' } }, { 'x-gw-cache': 'read_only', 'x-gw-cache-namespace': 'team-a' });
    expect(bodyMode.headers.get('x-gw-cache')).toBe('BYPASS');
  });

  it('an entry lives as long as its TTL', async () => {
    const messages = fresh();
    const first = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { ttl_seconds: 60 } });
    await f.settle();
    const keys = await redisKeys('rc:*');
    // Only hashes in keys, never the payload.
    expect(keys.every((k) => /^rc:\{[^}]+\}:[A-Za-z0-9._:-]+:[0-9a-f]{64}$/.test(k))).toBe(true);
    expect(keys.join(' ')).not.toContain('Say hello');
    // Expire the entry as Redis would at its TTL.
    let expired = 0;
    for (const k of keys) {
      const ttl = await redis().redis.ttl(k);
      expect(ttl).toBeLessThanOrEqual(600);
      if (ttl <= 60) expired += await redis().redis.pexpire(k, 1);
    }
    expect(expired).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 20));
    const after = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages });
    expect(after.headers.get('x-gw-cache')).toBe('MISS');
    expect(after.json.id).not.toBe(first.json.id);
  });

  it('validates the controls: malformed 400 invalid_cache_control, below 60 a plain 400, over the maximum cache_ttl_too_long', async () => {
    const messages = fresh();
    const expectError = (res: { status: number; json: Loose }, code: string) => {
      expect(res.status).toBe(400);
      expect(res.json.error).toMatchObject({ type: 'invalid_request_error', code });
    };
    expectError(await f.chat(secret, { model: 'openai/gpt-4o-mini', messages }, { 'x-gw-cache': 'sometimes' }), 'invalid_cache_control');
    expectError(await f.chat(secret, { model: 'openai/gpt-4o-mini', messages }, { 'x-gw-cache-ttl': 'ten' }), 'invalid_cache_control');
    expectError(await f.chat(secret, { model: 'openai/gpt-4o-mini', messages }, { 'x-gw-cache-namespace': 'no spaces' }), 'invalid_cache_control');
    expectError(await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { mode: 'always' } }), 'invalid_cache_control');
    expectError(await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: 'yes' }), 'invalid_cache_control');
    expectError(await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { ttl: 60 } }), 'invalid_cache_control');
    const short = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { ttl_seconds: 30 } });
    expect(short.status).toBe(400);
    expect(short.json.error.type).toBe('invalid_request_error');
    expect(short.json.error.code).not.toBe('cache_ttl_too_long');
    expect(short.json.error.message).toContain('ttl_seconds');
    expectError(await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { ttl_seconds: 2_592_001 } }), 'cache_ttl_too_long');
    // Business plan: 30 days is allowed.
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { ttl_seconds: 2_592_000 } })).status).toBe(200);
  });

  it('holds TTLs to the plan maximum: a trial organization may keep answers a day', async () => {
    const messages = fresh();
    await f.database.db.update(organizations).set({ plan: 'trial' }).where(eq(organizations.id, f.tenant.orgId));
    try {
      // The organization's configuration is re-read after a management write.
      await setCache({ enabled: true });
      expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { ttl_seconds: 86_401 } })).json.error?.code).toBe('cache_ttl_too_long');
      expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages }, { 'x-gw-cache-ttl': '172800' })).json.error?.code).toBe('cache_ttl_too_long');
      expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { ttl_seconds: 86_400 } })).status).toBe(200);
    } finally {
      await f.database.db.update(organizations).set({ plan: 'business' }).where(eq(organizations.id, f.tenant.orgId));
      await setCache({ enabled: true });
    }
  });

  it('n > 1 and logprobs are UNCACHEABLE and never stored', async () => {
    const messages = fresh();
    const many = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, logprobs: true });
    expect(many.headers.get('x-gw-cache')).toBe('UNCACHEABLE');
    expect(many.json.cache).toEqual({ status: 'uncacheable' });
    await f.settle();
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, logprobs: true })).headers.get('x-gw-cache')).toBe('UNCACHEABLE');
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, n: 2 })).headers.get('x-gw-cache')).toBe('UNCACHEABLE');
  });

  it('a Messages or Responses request with what its translation leaves out is UNCACHEABLE: the key would not tell it apart', async () => {
    const text = `Say hello ${Date.now()}-${n++}`;
    const messages = (body: Record<string, unknown>) => f.post('/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: text }], ...body }, { 'x-api-key': secret, 'anthropic-version': '2023-06-01' });
    // Plain, it is cached like a chat request; with thinking (which only Anthropic's wire carries), it is not.
    expect((await messages({})).headers.get('x-gw-cache')).toBe('MISS');
    await f.settle();
    expect((await messages({})).headers.get('x-gw-cache')).toBe('HIT');
    expect((await messages({ thinking: { type: 'enabled', budget_tokens: 1024 } })).headers.get('x-gw-cache')).toBe('UNCACHEABLE');
    // So is a field the translation does not read (an MCP server only Anthropic would call): named, never answered from the plain request's entry.
    const withMcp = await messages({ mcp_servers: [{ type: 'url', url: 'https://mcp.example.com/sse', name: 'docs' }] });
    expect(withMcp.headers.get('x-gw-cache')).toBe('UNCACHEABLE');
    expect(withMcp.headers.get('x-gw-params-dropped')).toBe('mcp_servers');
    const responses = (body: Record<string, unknown>) => f.post('/v1/responses', { model: 'openai/gpt-4o-mini', input: `${text} again`, ...body }, { authorization: `Bearer ${secret}` });
    expect((await responses({ tools: [{ type: 'web_search' }] })).headers.get('x-gw-cache')).toBe('UNCACHEABLE');
  });

  it('logging: false never writes the cache', async () => {
    const messages = fresh();
    const quiet = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, logging: false });
    expect(quiet.headers.get('x-gw-cache')).toBe('MISS');
    await f.settle();
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages })).headers.get('x-gw-cache')).toBe('MISS');
  });

  it('a streamed answer is stored once complete and replayed as chunks, usage chunk and [DONE]', async () => {
    const messages = fresh();
    const first = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, stream: true, stream_options: { include_usage: true } });
    expect(first.headers.get('x-gw-cache')).toBe('MISS');
    const text = (events: Array<Loose | string>) => events.filter((e): e is Loose => typeof e !== 'string').flatMap((e) => e.choices.map((c: Loose) => c.delta?.content ?? '')).join('');
    const firstEvents = sseData(first.text);
    await f.settle();
    const calls = providerCalls();

    const replay = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, stream: true, stream_options: { include_usage: true } });
    expect(providerCalls()).toBe(calls);
    expect(replay.headers.get('x-gw-cache')).toBe('HIT');
    expect(replay.headers.get('content-type')).toContain('text/event-stream');
    const events = sseData(replay.text);
    expect(events.at(-1)).toBe('[DONE]');
    expect(text(events)).toBe(text(firstEvents));
    const chunks = events.filter((e): e is Loose => typeof e !== 'string');
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]!.id)).toBe(true);
    expect(chunks.some((c) => c.choices[0]?.finish_reason === 'stop')).toBe(true);
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ cost: 0, price_source: 'gateway_cache', prompt_tokens: (firstEvents.at(-2) as Loose).usage.prompt_tokens });
    expect(usage.cache).toMatchObject({ status: 'hit', source_request_id: (firstEvents[0] as Loose).id, provider_billed: false });

    // The same question unstreamed is served from the streamed answer, whole.
    const whole = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages });
    expect(whole.headers.get('x-gw-cache')).toBe('HIT');
    expect(whole.json.choices[0].message.content).toBe(text(firstEvents));
    // Without include_usage the replay has no usage chunk.
    const bare = sseData((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, stream: true })).text);
    expect(bare.filter((e) => typeof e !== 'string' && e.usage)).toHaveLength(0);
  });

  it('a stream cut mid-answer is never cached', async () => {
    const messages = [{ role: 'user', content: `Say hello ${Date.now()} [sandbox cut_after=2]` }];
    const cut = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, stream: true });
    expect(cut.text).not.toContain('[DONE]');
    await f.settle();
    const again = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: messages[0]!.content }] });
    expect(again.headers.get('x-gw-cache')).toBe('MISS');
  });

  it('a hit under an exhausted blocking budget is served and holds nothing', async () => {
    const messages = fresh();
    expect((await f.chat(secret, { model: 'openai/gpt-4o', messages })).status).toBe(200);
    await f.settle();
    const broke = await f.key({ credit_limit: { amount: 0.01, period: 'monthly' } });
    const refused = await f.chat(broke, { model: 'openai/gpt-4o', messages: fresh() });
    expect(refused.status).toBe(402);
    const hit = await f.chat(broke, { model: 'openai/gpt-4o', messages });
    expect(hit.status).toBe(200);
    expect(hit.headers.get('x-gw-cache')).toBe('HIT');
    expect(hit.json.usage.cost).toBe(0);
    // Nothing held or spent against the key.
    const info = await fetch(`${f.api.url}/v1/key`, { headers: { authorization: `Bearer ${broke}` } }).then((r) => r.json() as Promise<Loose>);
    expect(info.usage).toBe(0);
    // This organization's holds only: other test files share the run's Redis prefix.
    for (const h of await redisKeys(`spend:{${f.tenant.orgId}}:*:h`)) expect(Number((await redis().redis.get(h)) ?? 0)).toBe(0);
  });

  it('a hit comes only from a connection the request could have used: environments and provider restrictions hold', async () => {
    const g = await startChatFixture();
    try {
      const current = await g.client.get<Loose>('/org_settings');
      expect((await g.client.patch('/org_settings', { response_cache: { enabled: true, default_ttl_seconds: 600 } }, current.etag!)).status).toBe(200);
      const dev = await g.connect('openai', { name: 'openai dev', extra: { environments: ['development'] } });
      const prod = await g.connect('openai', { name: 'openai prod', extra: { environments: ['production'] } });
      const anthropic = await g.connect('anthropic', { name: 'anthropic prod', extra: { environments: ['production'] } });
      const route = await g.client.post('/routes', { slug: 'two-vendors', targets: [{ connection_id: prod, model: 'gpt-4o-mini' }, { connection_id: anthropic, model: 'claude-3-5-haiku-latest' }] });
      expect(route.status).toBe(201);
      await g.settle();
      const devKey = await g.key({ environment: 'development' });
      const prodKey = await g.key({ environment: 'production' });
      const noOpenAi = await g.key({ environment: 'production', allowed_providers: ['anthropic'] });
      const messages = fresh();
      const ask = async (key: string, model: string) => {
        const res = await g.chat(key, { model, messages });
        expect(res.status).toBe(200);
        await g.settle();
        return [res.headers.get('x-gw-cache'), res.json.connection];
      };

      // A development key's answer is not served to a production key, nor the other way round.
      expect(await ask(devKey, 'openai/gpt-4o-mini')).toEqual(['MISS', dev]);
      expect(await ask(prodKey, 'openai/gpt-4o-mini')).toEqual(['MISS', prod]);
      expect(await ask(prodKey, 'openai/gpt-4o-mini')).toEqual(['HIT', prod]);
      expect(await ask(devKey, 'openai/gpt-4o-mini')).toEqual(['MISS', dev]);
      // A key denied OpenAI never gets an OpenAI-produced answer.
      expect(await ask(prodKey, 'two-vendors')).toEqual(['MISS', prod]);
      expect(await ask(noOpenAi, 'two-vendors')).toEqual(['MISS', anthropic]);
      expect(await ask(noOpenAi, 'two-vendors')).toEqual(['HIT', anthropic]);
    } finally {
      await g.close();
    }
  });

  it('switched off for the organization: DISABLED and no cache object; a request cannot turn it on', async () => {
    await setCache({ enabled: false });
    try {
      const messages = fresh();
      const off = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages, cache: { mode: 'default' } });
      expect(off.headers.get('x-gw-cache')).toBe('DISABLED');
      expect(off.json.cache).toBeUndefined();
      await f.settle();
      expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages })).headers.get('x-gw-cache')).toBe('DISABLED');
    } finally {
      await setCache({ enabled: true });
    }
  });

  it('org_settings shows and bounds response_cache', async () => {
    const settings = await f.client.get<Loose>('/org_settings');
    expect(settings.body.response_cache).toEqual({ enabled: true, default_ttl_seconds: 600 });
    const bad = await f.client.patch('/org_settings', { response_cache: { default_ttl_seconds: 10 } }, settings.etag!);
    expect(bad.status).toBe(400);
    // Over any plan's maximum is the spec's code too, not a bare 400.
    const long = await f.client.patch<Loose>('/org_settings', { response_cache: { default_ttl_seconds: 9_999_999 } }, settings.etag!);
    expect([long.status, long.body.error?.code]).toEqual([400, 'cache_ttl_too_long']);
  });
});
