import { eq } from 'drizzle-orm';
import { requestLogs, spendLedger } from '../../core/db/schema';
import { until } from '../helpers/until';
import { sseData, startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

const hello = [{ role: 'user', content: 'Say hello' }];
let seq = 0;
/** Sandbox failure counters are per directive text: a unique tag keeps tests apart. */
const tag = () => `tag=t${Date.now()}${seq++}`;

/** Every failover path of spec 7 and issue 4 against the sandbox over real HTTP. */
describe('chat failover, fallbacks and provider selection', () => {
  let f: ChatFixture;
  let secret: string;

  beforeAll(async () => {
    f = await startChatFixture();
    secret = await f.key();
  });
  afterAll(() => f.close());

  async function route(body: Record<string, unknown>): Promise<string> {
    const slug = `r-${Date.now()}-${seq++}`;
    const res = await f.client.post('/routes', { slug, ...body });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    await f.settle();
    return slug;
  }
  const hits = (connectionDirective: string) => f.sandbox.received.filter((r) => r.path.includes(connectionDirective)).length;
  const logRow = async (id: string) => {
    await f.api.runtime.deps.gateway.requestLog.flush();
    const [row] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, id));
    return row!;
  };

  it('429 on one connection, then success on the next (Retry-After never counts against it)', async () => {
    const limited = tag();
    const a = await f.connect('openai', { directives: `status=429,retry_after=7,${limited}` });
    const b = await f.connect('openai');
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }, { connection_id: b, model: 'gpt-4o-mini' }], failover: { rate_limit: 'failover' } });
    const res = await f.chat(secret, { model: slug, messages: hello });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ route: 'standby_a', route_name: slug, connection: b, provider: 'openai' });
    expect(hits(limited)).toBe(1);
    const row = await logRow(res.json.id);
    expect(row.attempts.map((x) => [x.connection_id, x.outcome, x.status, x.position])).toEqual([[a, 'rate_limit', 429, 'primary'], [b, 'ok', 200, 'standby_a']]);
  });

  it('retries a 5xx on the same connection when the route says retry', async () => {
    const flaky = tag();
    const a = await f.connect('openai', { directives: `status=500,times=1,${flaky}` });
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }], failover: { server_error: 'retry' }, max_retries: 1 });
    const res = await f.chat(secret, { model: slug, messages: hello });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ route: 'primary', connection: a });
    expect(hits(flaky)).toBe(2);
  });

  it('stops on credential when the route says stop: the next target is never tried', async () => {
    const bad = await f.connect('openai', { secret: 'sk-revoked' });
    const untouched = tag();
    const good = await f.connect('openai', { directives: untouched });
    const slug = await route({ targets: [{ connection_id: bad, model: 'gpt-4o-mini' }, { connection_id: good, model: 'gpt-4o-mini' }], failover: { credential: 'stop' } });
    const res = await f.chat(secret, { model: slug, messages: hello });
    expect([res.status, res.json.error?.type]).toEqual([502, 'upstream_error']);
    expect(res.json.error.message).toContain(bad);
    expect(res.json.error.message).toContain('credential');
    expect(res.json.error.message).not.toContain('sk-revoked');
    expect(hits(untouched)).toBe(0);
  });

  it('answers 408 when every connection timed out', async () => {
    const slow = tag();
    const a = await f.connect('openai', { directives: `delay_ms=3000,${slow}`, extra: { timeout_ms: 1000 } });
    const b = await f.connect('openai', { directives: `delay_ms=3000,${slow}x`, extra: { timeout_ms: 1000 } });
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }, { connection_id: b, model: 'gpt-4o-mini' }], max_retries: 0 });
    const res = await f.chat(secret, { model: slug, messages: hello });
    expect([res.status, res.json.error?.type, res.json.error?.code]).toEqual([408, 'request_timeout', null]);
  });

  it('charges a call our timeout cut before failing over: the prompt it was sent, with the answer that served (issue 33)', async () => {
    const slow = tag();
    const a = await f.connect('openai', { directives: `delay_ms=3000,${slow}`, extra: { timeout_ms: 1000 } });
    const b = await f.connect('openai');
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }, { connection_id: b, model: 'gpt-4o-mini' }], max_retries: 0 });
    const body = { model: slug, messages: [{ role: 'user', content: `Cut then served ${slow}` }] };
    const res = await f.chat(secret, body);
    expect([res.status, res.json.connection]).toEqual([200, b]);
    // The same request served by b alone: what the answer itself costs.
    const alone = await f.chat(secret, { ...body, model: await route({ targets: [{ connection_id: b, model: 'gpt-4o-mini' }] }) });
    expect(alone.status).toBe(200);
    const row = await logRow(res.json.id);
    expect(row.attempts.map((x) => x.outcome)).toEqual(['timeout', 'ok']);
    expect(row.cost!).toBeGreaterThan(alone.json.usage.cost);
    // The answer says what the request cost, the cut call included.
    expect(res.json.usage.cost).toBe(row.cost);
    const ledger = await until(async () => {
      const found = await f.database.db.select().from(spendLedger).where(eq(spendLedger.requestId, res.json.id));
      return found.length === 1 ? found[0]! : null;
    }, 'the ledger row');
    expect([ledger.state, ledger.amount]).toEqual(['settled', row.cost]);
  });

  it('charges a call our timeout cut its worst case, the prompt and the output cap it was sent with: its usage is never learned (issue 54)', async () => {
    const slow = tag();
    const a = await f.connect('openai', { directives: `delay_ms=3000,${slow}`, extra: { timeout_ms: 1000 } });
    const b = await f.connect('openai');
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }, { connection_id: b, model: 'gpt-4o-mini' }], max_retries: 0 });
    const body = { model: slug, messages: [{ role: 'user', content: `Cut at its cap ${slow}` }], max_tokens: 1000 };
    const res = await f.chat(secret, body);
    expect([res.status, res.json.connection]).toEqual([200, b]);
    const alone = await f.chat(secret, { ...body, model: await route({ targets: [{ connection_id: b, model: 'gpt-4o-mini' }] }) });
    // gpt-4o-mini writes at $0.60 a million: the cut call may have written all 1,000 tokens (and read its prompt at $0.15).
    const cut = res.json.usage.cost - alone.json.usage.cost;
    expect(cut).toBeGreaterThanOrEqual((1000 * 0.6) / 1e6);
    expect(cut).toBeLessThan((1000 * 0.6 + 100 * 0.15) / 1e6);
  });

  it('charges an image call our timeout cut before failing over at that candidate\'s price, with the image that served (issue 33)', async () => {
    const slow = tag();
    const a = await f.connect('openai', { directives: `delay_ms=3000,${slow}`, extra: { timeout_ms: 1000 } });
    const b = await f.connect('openai');
    const image = async (model: string) => {
      const res = await fetch(`${f.api.url}/v1/images/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': '10.9.9.7' },
        body: JSON.stringify({ model, prompt: `a lighthouse ${slow}` }),
      });
      expect(res.status).toBe(200);
      return res.headers.get('x-gw-request-id')!;
    };
    const cut = await image(await route({ targets: [{ connection_id: a, model: 'dall-e-3' }, { connection_id: b, model: 'dall-e-3' }], max_retries: 0 }));
    const alone = await image(await route({ targets: [{ connection_id: b, model: 'dall-e-3' }] }));
    const [cutRow, aloneRow] = [await logRow(cut), await logRow(alone)];
    expect(cutRow.attempts.map((x) => x.outcome)).toEqual(['timeout', 'ok']);
    // The cut call made (and was billed for) the same image: twice the one that served alone.
    expect(Math.round(cutRow.cost! * 1e9)).toBe(Math.round(2 * aloneRow.cost! * 1e9));
  });

  it('charges a stream whose client left while the provider was thinking, before any visible token (issue 33)', async () => {
    const thinking = tag();
    const a = await f.connect('openai', { directives: `delay_ms=2000,${thinking}` });
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }] });
    const session = `gone-${thinking}`;
    const controller = new AbortController();
    const pending = fetch(`${f.api.url}/v1/chat/completions`, {
      method: 'POST', signal: controller.signal,
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': '10.9.9.8' },
      body: JSON.stringify({ model: slug, messages: hello, stream: true, metadata: { session_id: session } }),
    }).catch(() => null);
    await until(async () => hits(thinking) > 0, 'the call to reach the provider');
    controller.abort();
    await pending;
    const row = await until(async () => {
      await f.api.runtime.deps.gateway.requestLog.flush();
      const [found] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.sessionId, session));
      return found ?? null;
    }, 'the 499 row');
    expect(row.status).toBe(499);
    expect(row.cost!).toBeGreaterThan(0);
    const ledger = await until(async () => {
      const found = await f.database.db.select().from(spendLedger).where(eq(spendLedger.requestId, row.id));
      return found.length === 1 ? found[0]! : null;
    }, 'the ledger row');
    expect([ledger.state, ledger.amount, ledger.provider]).toEqual(['settled', row.cost, 'openai']);
  });

  it('answers 429 provider_rate_limited with the provider Retry-After capped at 300 when the last failure was a rate limit', async () => {
    const a = await f.connect('openai', { directives: `status=429,retry_after=900,${tag()}` });
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }], max_retries: 0 });
    const res = await f.chat(secret, { model: slug, messages: hello });
    expect([res.status, res.json.error?.code, res.headers.get('retry-after')]).toEqual([429, 'provider_rate_limited', '300']);
  });

  it('cuts a broken stream with one error event: no [DONE], no usage chunk', async () => {
    const a = await f.connect('openai', { directives: `cut_after=3,${tag()}` });
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }] });
    const res = await f.chat(secret, { model: slug, messages: hello, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    const events = sseData(res.text);
    const content = events.filter((e): e is Loose => typeof e === 'object' && Array.isArray(e.choices) && e.choices[0]?.delta?.content);
    expect(content.map((e) => e.choices[0].delta.content).join('')).toBe('Hello from the ');
    const last = events.at(-1) as Loose;
    expect(last.error).toMatchObject({ type: 'upstream_error', message: expect.any(String) });
    expect(events).not.toContain('[DONE]');
    expect(events.some((e) => typeof e === 'object' && e.usage)).toBe(false);
  });

  it('fails over a stream that breaks before its first token', async () => {
    const a = await f.connect('openai', { directives: `cut_after=0,${tag()}` });
    const b = await f.connect('openai');
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }, { connection_id: b, model: 'gpt-4o-mini' }], max_retries: 0 });
    const res = await f.chat(secret, { model: slug, messages: hello, stream: true });
    const events = sseData(res.text);
    expect(events.at(-1)).toBe('[DONE]');
    expect((events[0] as Loose).connection).toBe(b);
  });

  it('uses a fallback model after every connection for the model failed; unknown fallbacks are refused by name', async () => {
    const f2 = await startChatFixture();
    try {
      await f2.connect('openai', { directives: 'status=500' });
      await f2.connect('anthropic');
      const key = await f2.key();
      const res = await f2.chat(key, { model: 'openai/gpt-4o-mini', messages: hello, fallbacks: ['anthropic/claude-3-5-haiku-latest'] });
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ provider: 'anthropic', route: 'standby_a', route_name: null });
      const unknown = await f2.chat(key, { model: 'openai/gpt-4o-mini', messages: hello, fallbacks: ['skynet-9000'] });
      expect([unknown.status, unknown.json.error?.code]).toEqual([400, 'unknown_fallback_model']);
      expect(unknown.json.error.message).toContain('skynet-9000');
      const six = await f2.chat(key, { model: 'openai/gpt-4o-mini', messages: hello, fallbacks: Array(6).fill('anthropic/claude-3-5-haiku-latest') });
      expect(six.status).toBe(400);
      // Without fallbacks the 500s surface as 502 naming the connection.
      const none = await f2.chat(key, { model: 'openai/gpt-4o-mini', messages: hello });
      expect([none.status, none.json.error?.type]).toEqual([502, 'upstream_error']);
    } finally {
      await f2.close();
    }
  });

  it('narrows with routing.providers allow/deny and never widens past the key', async () => {
    const o = await f.connect('openai');
    const a = await f.connect('anthropic');
    const slug = await route({ targets: [{ connection_id: o, model: 'gpt-4o-mini' }, { connection_id: a, model: 'claude-3-5-haiku-latest' }] });
    const denied = await f.chat(secret, { model: slug, messages: hello, routing: { providers: { deny: ['openai'] } } });
    expect(denied.json).toMatchObject({ provider: 'anthropic', connection: a, route: 'primary' });
    const allowed = await f.chat(secret, { model: slug, messages: hello, routing: { providers: { allow: ['anthropic'] } } });
    expect(allowed.json.provider).toBe('anthropic');
    const nothing = await f.chat(secret, { model: slug, messages: hello, routing: { providers: { allow: ['google'] } } });
    expect([nothing.status, nothing.json.error?.code]).toEqual([503, 'connection_out_of_scope']);
    const unknown = await f.chat(secret, { model: slug, messages: hello, routing: { providers: { allow: ['skynet'] } } });
    expect([unknown.status, unknown.json.error?.code]).toEqual([400, 'unknown_provider']);
    const both = await f.chat(secret, { model: slug, messages: hello, routing: { providers: { allow: ['openai'], deny: ['openai'] } } });
    expect([both.status, both.json.error?.code]).toEqual([400, 'invalid_provider_selection']);
    const anthropicOnly = await f.key({ allowed_providers: ['anthropic'] });
    const widened = await f.chat(anthropicOnly, { model: slug, messages: hello, routing: { providers: { allow: ['openai'] } } });
    expect([widened.status, widened.json.error?.code]).toEqual([503, 'connection_out_of_scope']);
  });

  it('tries pooled fallback credentials when the first is rejected, and alternate hosts when one is unreachable', async () => {
    const pooled = await f.connect('mistral', { secret: 'sk-rejected', extra: { fallback_secrets: ['sk-sandbox-spare'] } });
    const first = await f.chat(secret, { model: 'mistral/mistral-small-latest', messages: hello });
    expect([first.status, first.json.connection]).toEqual([200, pooled]);

    const res = await f.client.post<{ id: string }>('/provider_connections', {
      kind: 'custom', name: `alt ${seq++}`, secret: 'sk-sandbox-x',
      config: { base_url: 'http://127.0.0.1:9/v1' }, alternate_base_urls: [`${f.sandbox.url}/openai/v1`],
      model_map: { 'my-llm': 'gpt-4o-mini' },
    });
    await f.settle();
    const viaAlternate = await f.chat(secret, { model: 'custom/my-llm', messages: hello });
    expect([viaAlternate.status, viaAlternate.json.connection, viaAlternate.json.provider]).toEqual([200, res.body.id, 'custom']);
  });

  it('reads the upstream stream to its end when the client goes away, never abandoning it: the provider bills the whole answer (issue 54)', async () => {
    const long = Array.from({ length: 200 }, (_, i) => `w${i}`).join('%20');
    const a = await f.connect('openai', { directives: `reply=${long},${tag()}` });
    const slug = await route({ targets: [{ connection_id: a, model: 'gpt-4o-mini' }] });
    const before = f.sandbox.abandonedStreams();
    const controller = new AbortController();
    const res = await fetch(`${f.api.url}/v1/chat/completions`, {
      method: 'POST', signal: controller.signal,
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': '10.9.9.9' },
      body: JSON.stringify({ model: slug, messages: hello, stream: true }),
    });
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const id = /"id":"([^"]+)"/.exec(first)![1]!;
    controller.abort();
    const row = await until(async () => (await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, id)))[0], 'the request-log row');
    expect(f.sandbox.abandonedStreams()).toBe(before);
    // All 200 words the provider wrote were read and are what is charged, not only those relayed.
    expect([row.status, (row.usage as { completion_tokens: number }).completion_tokens]).toEqual([499, 200]);
  });
});
