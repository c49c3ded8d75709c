import { createOpenAI } from '@ai-sdk/openai';
import { embedMany } from 'ai';
import OpenAI from 'openai';
import { sandboxVector } from '../../sandbox/embeddings';
import { randomClientAddress } from '../helpers/harness';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

/**
 * Issue 35 item 3, with unmodified clients (only base URL and key changed): the `openai` SDK's
 * `embeddings.create` as floats and as base64, and the Vercel AI SDK's `embedMany`, through
 * OpenAI, Azure, Gemini and an OpenAI-compatible kind on the sandbox.
 */
const norm = (v: ArrayLike<number>) => Math.sqrt(Array.from(v).reduce((s, x) => s + x * x, 0));
/** The sandbox's vector for a text, shortened and made unit length again as OpenAI's are. */
const expected = (model: string, text: string, full: number, size = full) => {
  const v = sandboxVector(model, text, full).slice(0, size);
  const n = norm(v);
  return Array.from(v.map((x) => x / n));
};

describe('embeddings through the gateway with real clients', () => {
  let f: ChatFixture;
  let secret: string;
  let sdk: OpenAI;

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    await f.connect('google');
    await f.connect('mistral');
    await f.connect('azure_openai', { extra: { model_map: { 'text-embedding-3-small': 'text-embedding-3-small' } } });
    secret = await f.key({ rate_limit_rpm: 10_000 });
    sdk = new OpenAI({ apiKey: secret, baseURL: `${f.api.url}/v1`, maxRetries: 0, defaultHeaders: { 'x-forwarded-for': randomClientAddress() } });
  });
  afterAll(() => f.close());

  it('embeddings.create with floats: one vector per input, in order, priced per input token at the list price', async () => {
    const input = ['the quick brown fox', 'jumps over the lazy dog today'];
    // OpenAI's models are served by the Azure connection too: this one asks for OpenAI's own.
    const { data: answer, response } = await sdk.embeddings.create({ model: 'openai/text-embedding-3-small', input, encoding_format: 'float', routing: { providers: { allow: ['openai'] } } } as OpenAI.EmbeddingCreateParams).withResponse();
    expect(answer.object).toBe('list');
    expect(answer.model).toBe('text-embedding-3-small');
    expect(answer.data.map((d) => d.index)).toEqual([0, 1]);
    answer.data.forEach((d, i) => {
      expect(d.embedding).toHaveLength(1536);
      // float32 values, as the provider computed them.
      expect(d.embedding.slice(0, 8)).toEqual(expected('text-embedding-3-small', input[i]!, 1536).slice(0, 8).map((x) => Math.fround(x)));
    });
    // The sandbox counts words: 4 + 6 tokens at $0.02 a million.
    expect(answer.usage).toMatchObject({ prompt_tokens: 10, total_tokens: 10, cost: 0.0000002, price_source: 'list' });
    expect(answer as unknown as Loose).toMatchObject({ provider: 'openai', route: 'primary', route_name: null });
    expect(response.headers.get('x-gw-provider')).toBe('openai');
    expect(response.headers.get('x-gw-cost')).toBe('2e-7');
    // The provider is asked for base64 whatever the client asked: a quarter of the bytes.
    expect(f.sandbox.received.at(-1)).toMatchObject({ path: '/openai/v1/embeddings', body: { model: 'text-embedding-3-small', encoding_format: 'base64', input } });
  });

  it('embeddings.create as base64, and with the SDK\'s own default (it asks base64 and decodes): the same vectors', async () => {
    const raw = await sdk.embeddings.create({ model: 'openai/text-embedding-3-small', input: 'hello there', encoding_format: 'base64' });
    const b64 = raw.data[0]!.embedding as unknown as string;
    expect(typeof b64).toBe('string');
    const bytes = Buffer.from(b64, 'base64');
    expect(bytes.length).toBe(1536 * 4);
    const floats = await sdk.embeddings.create({ model: 'openai/text-embedding-3-small', input: 'hello there' });
    expect(floats.data[0]!.embedding).toHaveLength(1536);
    expect(floats.data[0]!.embedding[5]).toBe(bytes.readFloatLE(20));
  });

  it('shortens vectors with dimensions (unit length), and takes token ids', async () => {
    const short = await sdk.embeddings.create({ model: 'openai/text-embedding-3-large', input: 'shorter please', dimensions: 256, encoding_format: 'float' });
    expect(short.data[0]!.embedding).toHaveLength(256);
    expect(norm(short.data[0]!.embedding)).toBeCloseTo(1, 5);
    expect(short.usage).toMatchObject({ prompt_tokens: 2, cost: 0.00000026 });

    const ids = await sdk.embeddings.create({ model: 'openai/text-embedding-3-small', input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
    expect(ids.data).toHaveLength(2);
    expect(ids.usage.prompt_tokens).toBe(5);
  });

  it('through Azure (a deployment), Gemini (batchEmbedContents, shortened vectors made unit length, tokens estimated) and Mistral', async () => {
    const azure = await sdk.embeddings.create({ model: 'azure_openai/text-embedding-3-small', input: 'from azure', encoding_format: 'float' });
    expect(azure as unknown as Loose).toMatchObject({ provider: 'azure_openai', model: 'text-embedding-3-small' });
    expect(f.sandbox.received.at(-1)!.path).toMatch(/^\/azure\/openai\/deployments\/text-embedding-3-small\/embeddings\?api-version=/);

    const input = ['first text for gemini', 'second'];
    const gemini = await sdk.embeddings.create({ model: 'google/gemini-embedding-001', input, dimensions: 768, encoding_format: 'float' });
    const sent = f.sandbox.received.at(-1)!;
    expect(sent.path).toBe('/google/v1beta/models/gemini-embedding-001:batchEmbedContents');
    expect(sent.body).toEqual({ requests: input.map((text) => ({ model: 'models/gemini-embedding-001', content: { parts: [{ text }] }, outputDimensionality: 768 })) });
    gemini.data.forEach((d, i) => {
      expect(d.embedding).toHaveLength(768);
      // Gemini answers shortened vectors as they are; the gateway makes them unit length as OpenAI's.
      expect(norm(d.embedding)).toBeCloseTo(1, 5);
      expect(d.embedding[0]).toBeCloseTo(expected('gemini-embedding-001', input[i]!, 3072, 768)[0]!, 6);
    });
    // Gemini states no token count: the gateway's estimate (bytes / 3, rounded up per input), flagged.
    expect(gemini.usage).toMatchObject({ prompt_tokens: 7 + 2, total_tokens: 9, estimated: true, cost: 0.00000135, price_source: 'list' });

    const mistral = await sdk.embeddings.create({ model: 'mistral/mistral-embed', input: 'bonjour', encoding_format: 'float' });
    expect(mistral.data[0]!.embedding).toHaveLength(1024);
    expect(mistral.usage).toMatchObject({ prompt_tokens: 1, cost: 0.0000001 });
    // A compatible server is asked in its default form (floats).
    expect(f.sandbox.received.at(-1)!.body).toEqual({ model: 'mistral-embed', input: ['bonjour'] });
  });

  it('the Vercel AI SDK\'s embedMany', async () => {
    const provider = createOpenAI({ apiKey: secret, baseURL: `${f.api.url}/v1`, headers: { 'x-forwarded-for': randomClientAddress() } });
    const values = ['sunny day at the beach', 'rainy day in the city', 'a third one'];
    const { embeddings, usage } = await embedMany({ model: provider.embedding('openai/text-embedding-3-small'), values, maxRetries: 0 });
    expect(embeddings).toHaveLength(3);
    embeddings.forEach((e, i) => {
      expect(e).toHaveLength(1536);
      expect(e[0]).toBeCloseTo(expected('text-embedding-3-small', values[i]!, 1536)[0]!, 6);
    });
    expect(usage.tokens).toBe(5 + 5 + 3);
  });

  it('lists which models embed on /v1/models', async () => {
    const models = (await sdk.models.list()).data as unknown as Loose[];
    const byId = new Map(models.map((m) => [m.id, m]));
    expect(byId.get('openai/text-embedding-3-small')).toMatchObject({ object: 'model', owned_by: 'openai', type: 'embedding' });
    expect(byId.get('google/gemini-embedding-001')).toMatchObject({ type: 'embedding' });
    expect(byId.get('mistral/mistral-embed')).toMatchObject({ type: 'embedding' });
    expect(byId.get('azure_openai/text-embedding-3-small')).toMatchObject({ type: 'embedding' });
    expect(byId.get('openai/gpt-4o-mini')).toMatchObject({ type: 'chat' });
  });

  it('refuses what cannot be embedded with the spec error body, before any provider call', async () => {
    const before = f.sandbox.received.length;
    await expect(sdk.embeddings.create({ model: 'openai/text-embedding-ada-002', input: 'x', dimensions: 256 })).rejects.toMatchObject({ status: 400, type: 'invalid_request_error' });
    await expect(sdk.embeddings.create({ model: 'openai/text-embedding-3-small', input: '' })).rejects.toMatchObject({ status: 400, type: 'invalid_request_error' });
    await expect(sdk.embeddings.create({ model: 'google/gemini-embedding-001', input: [[1, 2]] })).rejects.toMatchObject({ status: 400, type: 'invalid_request_error' });
    await expect(sdk.embeddings.create({ model: 'openai/no-such-embedder', input: 'x' })).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
    expect(f.sandbox.received.length).toBe(before);
  });
});
