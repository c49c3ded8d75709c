import { eq } from 'drizzle-orm';
import { decode, encode } from 'gpt-tokenizer/encoding/cl100k_base';
import { requestLogs } from '../../core/db/schema';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { until } from '../helpers/until';

/**
 * What the gateway does for every request applies to `POST /v1/embeddings` (issue 35): the
 * response cache (exact, shared across encodings, within the key's reach), the request log
 * without vectors, failover, spend holds and guardrails.
 */
describe('embeddings through the gateway', () => {
  let f: ChatFixture;
  let secret: string;
  let seq = 0;
  const fresh = (text = 'embed me') => `${text} ${Date.now()}-${seq++}`;
  const embed = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}, api = f) =>
    api.post('/v1/embeddings', { model: 'openai/text-embedding-3-small', ...body }, { authorization: `Bearer ${key}`, ...headers });
  const logRow = (id: string, api = f) => until(async () => (await api.database.db.select().from(requestLogs).where(eq(requestLogs.id, id)))[0], `request-log row ${id}`);
  /** Entries of this organization in the response cache (the API's Redis, under its key prefix). */
  const cacheEntries = async () => {
    const { redis, prefix } = f.api.runtime.deps.redis;
    return (await redis.keys(`${prefix}rc:{${f.tenant.orgId}}:*`)).length;
  };
  // Azure's path ends in `?api-version=`: every embeddings call is counted, whichever connection served.
  const providerCalls = () => f.sandbox.received.filter((r) => r.path.split('?')[0]!.endsWith('/embeddings')).length;
  const settings = async (patch: Record<string, unknown>) => {
    const current = await f.client.get<Loose>('/org_settings');
    expect((await f.client.patch('/org_settings', patch, current.etag!)).status).toBe(200);
    await f.settle();
  };

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    secret = await f.key();
    await settings({ prompt_logging_enabled: true });
  });
  afterAll(() => f.close());

  it('logs the request with its input and each vector\'s length, never a vector', async () => {
    const input = [fresh(), fresh()];
    const res = await embed(secret, { input, dimensions: 64, metadata: { user_id: 'u-1' } });
    expect(res.status).toBe(200);
    const row = await logRow(res.id);
    expect(row).toMatchObject({ endpoint: 'embeddings', status: 200, provider: 'openai', requestedModel: 'openai/text-embedding-3-small', servedModel: 'text-embedding-3-small', userId: 'u-1', priceSource: 'list' });
    expect(row.usage).toMatchObject({ prompt_tokens: 6, total_tokens: 6 });
    expect(Number(row.cost)).toBeCloseTo(6 * 0.02 / 1e6, 12);
    expect(row.requestBody).toEqual({ model: 'openai/text-embedding-3-small', input, dimensions: 64 });
    expect(row.responseBody).toEqual({ data: [{ index: 0, dimensions: 64 }, { index: 1, dimensions: 64 }] });
  });

  it('answers the same inputs again from the cache, in either encoding, without calling the provider', async () => {
    await settings({ response_cache: { enabled: true, default_ttl_seconds: 600 } });
    try {
      const input = [fresh('cache me'), fresh('and me')];
      const kept = await cacheEntries();
      const first = await embed(secret, { input, encoding_format: 'float' });
      expect(first.headers.get('x-gw-cache')).toBe('MISS');
      expect(first.json.cache).toEqual({ status: 'miss' });
      const calls = providerCalls();
      // The answer is written off its path: wait until it is kept.
      await until(async () => (await cacheEntries()) > kept, 'the answer kept in the cache');

      const again = await embed(secret, { input, encoding_format: 'base64' });
      expect(again.status).toBe(200);
      expect(again.headers.get('x-gw-cache')).toBe('HIT');
      expect(again.headers.get('x-gw-cache-source')).toBe(first.id);
      expect(again.headers.get('x-gw-provider')).toBe('openai');
      expect(providerCalls()).toBe(calls);
      expect(again.json).toMatchObject({
        object: 'list', model: 'text-embedding-3-small', provider: 'openai', route: 'primary',
        cache: { status: 'hit', source_request_id: first.id, provider_billed: false, age_seconds: expect.any(Number) },
        usage: { prompt_tokens: first.json.usage.prompt_tokens, cost: 0, price_source: 'gateway_cache' },
      });
      // The kept vectors are the served ones, bit for bit, whatever encoding either request asked.
      const bytes = Buffer.from(again.json.data[1].embedding, 'base64');
      expect(first.json.data[1].embedding.map((_: number, i: number) => bytes.readFloatLE(i * 4))).toEqual(first.json.data[1].embedding);
      expect(await logRow(again.id)).toMatchObject({ status: 200, cost: 0, priceSource: 'gateway_cache', cacheStatus: 'hit', cacheSourceRequestId: first.id, provider: 'openai' });

      // Another vector length, or other inputs, is another answer.
      expect((await embed(secret, { input, dimensions: 32 })).headers.get('x-gw-cache')).toBe('MISS');
      expect((await embed(secret, { input: [input[0]] })).headers.get('x-gw-cache')).toBe('MISS');
      expect((await embed(secret, { input, cache: { mode: 'bypass' } })).headers.get('x-gw-cache')).toBe('BYPASS');

      // A request whose plan cannot reach the connection that made it is not given it.
      await f.connect('azure_openai', { name: 'azure embeddings', extra: { model_map: { 'text-embedding-3-small': 'text-embedding-3-small' } } });
      const viaAzure = await embed(secret, { input, encoding_format: 'float', routing: { providers: { allow: ['azure_openai'] } } });
      expect([viaAzure.headers.get('x-gw-cache'), viaAzure.json.provider]).toEqual(['MISS', 'azure_openai']);
    } finally {
      await settings({ response_cache: { enabled: false } });
    }
  });

  it('fails over to the next connection when the first one fails, logging every attempt', async () => {
    const g = await startChatFixture();
    try {
      const broken = await g.connect('openai', { directives: 'status=503', name: 'broken openai' });
      const good = await g.connect('azure_openai', { name: 'good azure', extra: { model_map: { 'text-embedding-3-small': 'text-embedding-3-small' } } });
      const key = await g.key();
      const route = await g.client.post<Loose>('/routes', { slug: 'embedder', targets: [{ connection_id: broken, model: 'text-embedding-3-small' }, { connection_id: good, model: 'text-embedding-3-small' }] });
      expect(route.status).toBe(201);
      await g.settle();
      const res = await embed(key, { model: 'embedder', input: fresh() }, {}, g);
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ provider: 'azure_openai', connection: good, route: 'standby_a', route_name: 'embedder' });
      const row = await logRow(res.id, g);
      // A server error is retried on the same target (the route's default action, up to its max_retries), then the next target.
      expect(row.attempts.map((a) => [a.connection_id, a.outcome])).toEqual([[broken, 'server_error'], [broken, 'server_error'], [good, 'ok']]);
      // A route whose every target embeds is listed as an embedding model.
      const models = await fetch(`${g.api.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json() as Promise<Loose>);
      expect(models.data.find((m: Loose) => m.id === 'embedder')).toMatchObject({ owned_by: 'route', type: 'embedding' });
    } finally {
      await g.close();
    }
  });

  it('holds the worst case under a blocking limit: a request that could pass it is 402 and reaches nothing', async () => {
    // A customer rate that makes one token cost a cent.
    expect((await f.client.post('/model_prices', { model: 'openai/text-embedding-3-large', provider: 'openai', input_per_million: 10_000, output_per_million: 0 })).status).toBe(201);
    await f.settle();
    const limited = await f.key({ credit_limit: { amount: 0.05, period: 'monthly' } });
    const calls = providerCalls();
    const refused = await embed(limited, { model: 'openai/text-embedding-3-large', input: 'x'.repeat(300) });
    expect(refused.status).toBe(402);
    expect(refused.json.error).toMatchObject({ type: 'budget_exceeded', code: 'key_budget' });
    expect(providerCalls()).toBe(calls);
    // A short one fits, and is charged at the customer's rate for what the provider counted.
    const served = await embed(limited, { model: 'openai/text-embedding-3-large', input: 'two words' });
    expect(served.status).toBe(200);
    expect(served.json.usage).toMatchObject({ prompt_tokens: 2, cost: 0.02, price_source: 'custom_provider' });
  });

  it('redacts what an input guardrail redacts before it is embedded, and blocks what it blocks', async () => {
    const key = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: 'guarded embeddings', project_id: f.tenant.projectId });
    expect((await f.client.post('/guardrail_policies', { target: `key:${key.body.id}`, rules: [
      { detector: 'email', stage: 'input', action: 'redact' },
      { detector: 'keywords', stage: 'input', action: 'block', words: ['forbidden'] },
    ] })).status).toBe(201);
    await f.settle();
    const redacted = await embed(key.body.secret, { input: [fresh('write to jane@example.com'), 'plain'] });
    expect(redacted.status).toBe(200);
    expect(redacted.headers.get('x-gw-guardrails')).toBeTruthy();
    expect(JSON.stringify(f.sandbox.received.at(-1)!.body)).not.toContain('jane@example.com');
    expect(JSON.stringify((await logRow(redacted.id)).requestBody)).not.toContain('jane@example.com');

    const calls = providerCalls();
    const blocked = await embed(key.body.secret, { input: ['fine', 'forbidden words'] });
    expect(blocked.status).toBe(403);
    expect(blocked.json.error).toMatchObject({ code: 'guardrail_blocked' });
    expect(providerCalls()).toBe(calls);
  });

  it('reads token-id input as text for guardrails: blocked, redacted and sent as ids, or refused when its tokenizer is unknown', async () => {
    // OpenAI's embedding models take cl100k_base ids (what tiktoken gives a client).
    const ids = (text: string) => encode(text);
    const sentInput = () => (f.sandbox.received.at(-1)!.body as { input: number[][] }).input;
    const key = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: 'guarded token ids', project_id: f.tenant.projectId });
    expect((await f.client.post('/guardrail_policies', { target: `key:${key.body.id}`, rules: [
      { detector: 'email', stage: 'input', action: 'redact' },
      { detector: 'keywords', stage: 'input', action: 'block', words: ['forbidden'] },
    ] })).status).toBe(201);
    await f.settle();

    // One input of ids whose text a rule blocks: refused, and the provider never asked.
    const calls = providerCalls();
    const blocked = await embed(key.body.secret, { input: ids(`these are forbidden words ${fresh()}`) });
    expect([blocked.status, blocked.json.error?.code]).toEqual([403, 'guardrail_blocked']);
    expect(providerCalls()).toBe(calls);

    // An email among several inputs: that input is sent as the redacted text's ids; the others as they came.
    const plain = ids(fresh('plain words'));
    const withEmail = ids(`write to jane@example.com ${fresh()}`);
    const redacted = await embed(key.body.secret, { input: [plain, withEmail] });
    expect(redacted.status).toBe(200);
    expect(redacted.headers.get('x-gw-guardrails')).toBe('redacted');
    const [sentPlain, sentRedacted] = sentInput();
    expect(sentPlain).toEqual(plain);
    expect(sentRedacted!.every((id) => Number.isInteger(id))).toBe(true);
    expect(decode(sentRedacted!)).not.toContain('jane@example.com');
    expect(decode(sentRedacted!)).toContain('write to ');
    // The log keeps neither the address nor the ids that spell it.
    const logged = JSON.stringify((await logRow(redacted.id)).requestBody);
    expect(logged).not.toContain('jane@example.com');
    expect(logged).not.toContain(withEmail.join(','));

    // An id the encoding does not have: a 400 naming it, since its text cannot be checked.
    const unknownId = await embed(key.body.secret, { input: [ids('fine'), [9906, 100256]] });
    expect([unknownId.status, unknownId.json.error?.type]).toEqual([400, 'invalid_request_error']);
    expect(unknownId.json.error.message).toContain('100256');

    // A model whose tokenizer the gateway does not know: refused, saying why, never sent unchecked.
    await f.connect('mistral');
    const mistral = await embed(key.body.secret, { model: 'mistral/mistral-embed', input: ids('forbidden words') });
    expect([mistral.status, mistral.json.error?.type]).toEqual([400, 'invalid_request_error']);
    expect(mistral.json.error.message).toMatch(/tokenizer of `mistral\/mistral-embed`.*send the input as text/);
    expect(providerCalls()).toBe(calls + 1);

    // Without a guardrail policy, token ids are sent exactly as they came, whatever they spell.
    const unguarded = ids(`forbidden jane@example.com ${fresh()}`);
    const open = await embed(secret, { input: [unguarded] });
    expect(open.status).toBe(200);
    expect(sentInput()).toEqual([unguarded]);
  });

  it('refuses bad input with the spec error body and changes nothing', async () => {
    for (const body of [{ input: [] }, { input: ['ok', ''] }, { input: 'x', encoding_format: 'hex' }, { input: 'x', dimensions: 0 }, { input: Array(2049).fill('x') }]) {
      const res = await embed(secret, body);
      expect([res.status, res.json.error?.type]).toEqual([400, 'invalid_request_error']);
    }
  });
});
