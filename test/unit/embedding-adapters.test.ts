import { fetch } from 'undici';
import { embeddingModel, embeddingModelsOf } from '../../core/catalog/embedding-models';
import { credentialHeaders } from '../../core/providers/kinds';
import { GEMINI_EMBED_BATCH_MAX, googleMediaAdapter, normalised } from '../../core/providers/media/google';
import { mediaAdapterFor } from '../../core/providers/media/index';
import { azureOpenAiMediaAdapter, openAiOwnMediaAdapter } from '../../core/providers/media/openai';
import type { EmbeddingsBody } from '../../core/providers/media/types';
import { float32FromBase64, float32ToBase64 } from '../../core/providers/media/vectors';
import type { UpstreamRequest } from '../../core/providers/types';
import { startSandbox, type Sandbox } from '../../sandbox/server';

/**
 * The embeddings wires (issue 35) as data plus pure transforms: each builder and parser on
 * fixtures as the providers send them, then each builder's output sent to the sandbox and its
 * answer read back.
 */
const openai = openAiOwnMediaAdapter;
const azure = azureOpenAiMediaAdapter;
const google = googleMediaAdapter;
const mistral = mediaAdapterFor('mistral', 'embeddings')!;
const build = (model: string, config: Record<string, unknown> = {}) => ({ model, config });
const body = (input: EmbeddingsBody['input'], more: Partial<EmbeddingsBody> = {}): EmbeddingsBody => ({ input, extra: {}, ...more });

describe('OpenAI-wire embeddings', () => {
  it('asks OpenAI and Azure for base64 and a compatible kind in its default; passes the client\'s other fields', () => {
    expect(openai.embeddingsRequest(body(['a', 'b'], { dimensions: 256, extra: { user: 'u1' } }), build('text-embedding-3-small'))).toEqual({
      method: 'POST', path: '/embeddings', body: { user: 'u1', input: ['a', 'b'], model: 'text-embedding-3-small', dimensions: 256, encoding_format: 'base64' },
    });
    expect(azure.embeddingsRequest(body([[1, 2]]), build('emb prod'))).toEqual({
      method: 'POST', path: '/deployments/emb%20prod/embeddings', query: { 'api-version': '2024-10-21' }, body: { input: [[1, 2]], model: 'emb prod', encoding_format: 'base64' },
    });
    expect(mistral.embeddingsRequest(body(['a']), build('mistral-embed'))).toEqual({ method: 'POST', path: '/embeddings', body: { input: ['a'], model: 'mistral-embed' } });
  });

  it('reads floats and base64, placed by index; usage.prompt_tokens', () => {
    const v = Float32Array.from([0.25, -0.5, 0.125]);
    const answer = { object: 'list', data: [{ object: 'embedding', index: 1, embedding: float32ToBase64(v) }, { object: 'embedding', index: 0, embedding: [1, 0, 0] }], model: 'm', usage: { prompt_tokens: 7, total_tokens: 7 } };
    const result = openai.parseEmbeddings(answer, body(['x', 'y']));
    expect(result.promptTokens).toBe(7);
    expect(Array.from(result.vectors[0]!)).toEqual([1, 0, 0]);
    expect(Array.from(result.vectors[1]!)).toEqual([0.25, -0.5, 0.125]);
  });

  it('throws on an answer that is not one vector per input', () => {
    expect(() => openai.parseEmbeddings({ data: [{ index: 0, embedding: [1] }] }, body(['x', 'y']))).toThrow(/1 vectors for 2 inputs/);
    expect(() => openai.parseEmbeddings({ data: [{ index: 0, embedding: [1] }, { index: 0, embedding: [2] }] }, body(['x', 'y']))).toThrow(/stray index/);
    expect(() => openai.parseEmbeddings({ data: [{ index: 0, embedding: 'abc' }] }, body(['x']))).toThrow(/whole number of float32/);
    expect(() => openai.parseEmbeddings({}, body(['x']))).toThrow(/no data/);
  });

  it('round-trips base64 float32 exactly', () => {
    const v = Float32Array.from([Math.fround(0.1), -3.5e-7, 1e30, -0]);
    expect(float32FromBase64(float32ToBase64(v))).toEqual(v);
  });
});

describe('Gemini embeddings', () => {
  it('one batchEmbedContents request per input, with outputDimensionality for dimensions', () => {
    expect(google.embeddingsRequest(body(['a', 'b'], { dimensions: 768 }), build('gemini-embedding-001'))).toEqual({
      method: 'POST',
      path: '/models/gemini-embedding-001:batchEmbedContents',
      body: { requests: ['a', 'b'].map((text) => ({ model: 'models/gemini-embedding-001', content: { parts: [{ text }] }, outputDimensionality: 768 })) },
    });
  });

  it('refuses token ids and more inputs than one batch takes', () => {
    expect(google.embeddingsRequest(body([[1, 2]]), build('gemini-embedding-001'))).toEqual({ refusal: expect.stringMatching(/text only/) });
    expect(google.embeddingsRequest(body(Array(GEMINI_EMBED_BATCH_MAX + 1).fill('x')), build('gemini-embedding-001'))).toEqual({ refusal: expect.stringMatching(/at most 100/) });
  });

  it('reads values in order, states no token count, and makes shortened vectors unit length', () => {
    const answer = { embeddings: [{ values: [3, 4] }, { values: [0.6, 0.8] }] };
    const full = google.parseEmbeddings(answer, body(['a', 'b']));
    expect(full.promptTokens).toBeNull();
    expect(Array.from(full.vectors[0]!)).toEqual([3, 4]);
    const short = google.parseEmbeddings(answer, body(['a', 'b'], { dimensions: 2 }));
    expect(Array.from(short.vectors[0]!).map((x) => Math.round(x * 1e6) / 1e6)).toEqual([0.6, 0.8]);
    expect(() => google.parseEmbeddings({ embeddings: [{ values: [1] }] }, body(['a', 'b']))).toThrow(/1 vectors for 2 inputs/);
    expect(normalised(Float32Array.from([0, 0]))).toEqual(Float32Array.from([0, 0]));
  });
});

describe('the embedding models table', () => {
  it('knows each model by its name or its gateway id, per kind', () => {
    expect(embeddingModel('openai', 'text-embedding-3-small')).toEqual({ model: 'text-embedding-3-small', dimensions: 1536, shortenable: true, maxInputTokens: 8191, tokenizer: 'cl100k_base' });
    expect(embeddingModel('azure_openai', 'azure_openai/text-embedding-3-large')).toMatchObject({ dimensions: 3072 });
    expect(embeddingModel('openai', 'gpt-4o-mini')).toBeNull();
    expect(embeddingModel('google', 'text-embedding-3-small')).toBeNull();
    expect(embeddingModelsOf('google')).toEqual(['gemini-embedding-001', 'text-embedding-004']);
  });

  it('names only kinds whose wire serves embeddings', () => {
    for (const kind of ['openai', 'azure_openai', 'google', 'mistral', 'together', 'fireworks'] as const) {
      expect(embeddingModelsOf(kind).length).toBeGreaterThan(0);
      expect(mediaAdapterFor(kind, 'embeddings')).not.toBeNull();
    }
  });
});

describe('embeddings against the sandbox', () => {
  const KEY = 'sk-sandbox-embeddings';
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox();
  });
  afterAll(() => sandbox.close());

  const base = { openai: () => `${sandbox.url}/openai/v1`, azure_openai: () => `${sandbox.url}/azure/openai`, google: () => `${sandbox.url}/google/v1beta` };
  async function send(flavor: keyof typeof base, req: UpstreamRequest | { refusal: string }) {
    if ('refusal' in req) throw new Error(req.refusal);
    const url = `${base[flavor]()}${req.path}${req.query ? `?${new URLSearchParams(req.query).toString()}` : ''}`;
    const res = await fetch(url, { method: 'POST', headers: { ...credentialHeaders(flavor, KEY), 'content-type': 'application/json' }, body: JSON.stringify(req.body) });
    return { status: res.status, json: (await res.json()) as { embeddings: Array<{ values: number[] }> } & Record<string, unknown> };
  }

  it('OpenAI and Azure answer base64 the parser reads; shortened vectors are unit length', async () => {
    for (const [flavor, adapter] of [['openai', openai], ['azure_openai', azure]] as const) {
      const request = body(['one two', 'three'], { dimensions: 64 });
      const { status, json } = await send(flavor, adapter.embeddingsRequest(request, build('text-embedding-3-small')));
      expect(status).toBe(200);
      const result = adapter.parseEmbeddings(json, request);
      expect(result.promptTokens).toBe(3);
      expect(result.vectors.map((v) => v.length)).toEqual([64, 64]);
      expect(Math.hypot(...result.vectors[0]!)).toBeCloseTo(1, 5);
    }
  });

  it('Gemini answers what the parser reads; the sandbox refuses what the real API refuses', async () => {
    const request = body(['a text'], { dimensions: 256 });
    const { status, json } = await send('google', google.embeddingsRequest(request, build('gemini-embedding-001')));
    expect(status).toBe(200);
    expect(Math.hypot(...json.embeddings[0]!.values)).toBeLessThan(0.99);
    const result = google.parseEmbeddings(json, request);
    expect(Math.hypot(...result.vectors[0]!)).toBeCloseTo(1, 5);
    expect((await send('google', google.embeddingsRequest(body(['x'], { dimensions: 4000 }), build('gemini-embedding-001')))).status).toBe(400);
    expect((await send('openai', openai.embeddingsRequest(body(['x'], { dimensions: 8 }), build('text-embedding-ada-002')))).json).toMatchObject({ error: { message: 'This model does not support specifying dimensions.' } });
    expect((await send('openai', openai.embeddingsRequest(body(['x']), build('gpt-4o-mini')))).status).toBe(404);
  });
});
