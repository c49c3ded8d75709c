import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fetch } from 'undici';
import { multipartForward, type SpooledFile } from '../../core/http/multipart';
import { credentialHeaders, PROVIDER_KINDS, type ProviderKind } from '../../core/providers/kinds';
import { googleMediaAdapter, imagenAspectRatio } from '../../core/providers/media/google';
import { COMPATIBLE_MEDIA_ENDPOINTS, MEDIA_ADAPTERS, mediaAdapterFor } from '../../core/providers/media/index';
import { azureOpenAiMediaAdapter, openAiCompatibleMediaAdapter, openAiMediaAdapter } from '../../core/providers/media/openai';
import { formatOverride, measuringFormat, transcriptAs } from '../../core/providers/media/transcript-formats';
import { MEDIA_ENDPOINTS, type MediaEndpoint, type MultipartUpstream, type TranscriptionFormat } from '../../core/providers/media/types';
import type { UpstreamRequest } from '../../core/providers/types';
import { png, wav } from '../../sandbox/files';
import { startSandbox, type Sandbox } from '../../sandbox/server';

/**
 * The image and audio wires (issue 14) as data plus pure transforms: each builder and parser on
 * fixtures, then each builder's output sent to the sandbox (sandbox/media.ts, which refuses what
 * the real APIs refuse) and its answer read back by the parser.
 */
const openai = openAiMediaAdapter();
const azure = azureOpenAiMediaAdapter;
const google = googleMediaAdapter;
const build = (model: string, config: Record<string, unknown> = {}) => ({ model, config });

const PNG_B64 = png(4, 4).toString('base64');
const JPEG_B64 = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46]).toString('base64');
const WEBP_B64 = Buffer.from('RIFF\x24\x00\x00\x00WEBPVP8 ', 'latin1').toString('base64');

/** Answers as the providers send them. */
const FIXTURES = {
  dallE3: { created: 1_700_000_000, data: [{ b64_json: PNG_B64, revised_prompt: 'A red fox, photographed at dusk' }] },
  gptImage: {
    created: 1_700_000_001,
    data: [{ b64_json: PNG_B64 }, { b64_json: PNG_B64 }],
    background: 'opaque', output_format: 'jpeg', quality: 'low', size: '1536x1024',
    usage: { input_tokens: 3, input_tokens_details: { text_tokens: 3, image_tokens: 0 }, output_tokens: 816, total_tokens: 819 },
  },
  urlOnly: { created: 1_700_000_002, data: [{ url: 'https://oaidalleapiprodscus.blob.core.windows.net/private/img.png' }] },
  xai: { data: [{ b64_json: JPEG_B64, revised_prompt: 'A cat', mime_type: 'image/jpeg' }] },
  together: { id: 'x', model: 'black-forest-labs/FLUX.1-schnell', object: 'list', data: [{ index: 0, b64_json: JPEG_B64, type: 'b64_json' }] },
  whisperJson: { text: 'Hello there.', usage: { type: 'duration', seconds: 3 } },
  gpt4oJson: { text: 'Hello there.', usage: { type: 'tokens', input_tokens: 32, input_token_details: { text_tokens: 2, audio_tokens: 30 }, output_tokens: 3, total_tokens: 35 } },
  verbose: { task: 'transcribe', language: 'english', duration: 2.51, text: 'Hello there.', segments: [], usage: { type: 'duration', seconds: 3 } },
  verboseNoUsage: { task: 'transcribe', language: 'english', duration: 2.51, text: 'Hello there.', x_groq: { id: 'req_1' } },
  imagen: { predictions: [{ bytesBase64Encoded: PNG_B64, mimeType: 'image/png' }, { bytesBase64Encoded: JPEG_B64, mimeType: 'image/jpeg' }] },
};

describe('OpenAI media adapter', () => {
  it('images: the body passes through (unknown fields too) with the upstream model, always asking base64 of dall-e', () => {
    const req = openai.imagesRequest({ model: 'openai/dall-e-3', prompt: 'a fox', size: '1792x1024', style: 'natural', response_format: 'url', user: 'u1', extra: { a: 1 } }, build('dall-e-3'));
    expect(req).toEqual({
      method: 'POST',
      path: '/images/generations',
      body: { model: 'dall-e-3', prompt: 'a fox', size: '1792x1024', style: 'natural', response_format: 'b64_json', user: 'u1', extra: { a: 1 } },
    });
    expect(openai.imagesRequest({ model: 'x', prompt: 'a fox' }, build('dall-e-2')).body).toEqual({ model: 'dall-e-2', prompt: 'a fox', response_format: 'b64_json' });
  });

  it('images: gpt-image models get no response_format (they refuse it and answer base64 anyway)', () => {
    for (const model of ['gpt-image-1', 'gpt-image-1-mini']) {
      const req = openai.imagesRequest({ model: 'x', prompt: 'boats', response_format: 'url', output_format: 'webp', background: 'transparent' }, build(model));
      expect(req.body).toEqual({ model, prompt: 'boats', output_format: 'webp', background: 'transparent' });
      expect(openai.imagesRequest({ model: 'x', prompt: 'boats' }, build(model)).body).not.toHaveProperty('response_format');
    }
  });

  it('edits: overrides name the model and ask base64 (dall-e) or remove response_format (gpt-image)', () => {
    const fields = { model: 'openai/dall-e-2', prompt: 'add a hat', response_format: 'url' };
    expect(openai.editRequest(fields, build('dall-e-2'))).toEqual({ path: '/images/edits', overrides: { model: 'dall-e-2', response_format: 'b64_json' } });
    expect(openai.editRequest(fields, build('gpt-image-1'))).toEqual({ path: '/images/edits', overrides: { model: 'gpt-image-1', response_format: null } });
  });

  it('transcriptions: overrides name the model and ask a format that states the audio\'s length (issue 20)', () => {
    const asked = (fields: Record<string, string | string[]>, model: string, modelId?: string) => openai.transcriptionRequest(fields, { ...build(model), modelId }).overrides;
    // whisper: verbose_json (its `duration`) whatever was asked; the gateway renders the client's format.
    for (const format of ['json', 'text', 'srt', 'vtt']) expect(asked({ model: 'openai/whisper-1', response_format: format }, 'whisper-1')).toEqual({ model: 'whisper-1', response_format: 'verbose_json' });
    expect(asked({ model: 'openai/whisper-1' }, 'whisper-1')).toEqual({ model: 'whisper-1', response_format: 'verbose_json' });
    expect(asked({ response_format: 'verbose_json' }, 'whisper-1')).toEqual({ model: 'whisper-1' });
    // timestamp_granularities[] is valid only with verbose_json: sent as asked, for the provider to judge.
    expect(asked({ response_format: 'text', 'timestamp_granularities[]': ['word'] }, 'whisper-1')).toEqual({ model: 'whisper-1' });
    // gpt-4o transcribe models take only json and text; their json reports token usage.
    expect(asked({ response_format: 'text' }, 'gpt-4o-transcribe')).toEqual({ model: 'gpt-4o-transcribe', response_format: 'json' });
    expect(asked({ response_format: 'json' }, 'gpt-4o-mini-transcribe')).toEqual({ model: 'gpt-4o-mini-transcribe' });
    expect(asked({ response_format: 'text' }, 'stt-prod', 'azure_openai/gpt-4o-transcribe')).toEqual({ model: 'stt-prod', response_format: 'json' });
  });

  describe('transcripts rendered from the answer asked upstream (transcript-formats.ts)', () => {
    const verbose = {
      task: 'transcribe', language: 'english', duration: 3.5, text: 'Hello there. General Kenobi.',
      segments: [{ id: 0, start: 0, end: 1.25, text: ' Hello there.' }, { id: 1, start: 1.25, end: 3.5, text: ' General Kenobi.' }],
      usage: { type: 'duration', seconds: 4 },
    };
    it('json, text, srt and vtt as OpenAI writes them; the same format unchanged', () => {
      expect(transcriptAs('json', 'verbose_json', verbose, 4)).toEqual({ text: 'Hello there. General Kenobi.', usage: { type: 'duration', seconds: 4 } });
      expect(transcriptAs('text', 'verbose_json', verbose, 4)).toBe('Hello there. General Kenobi.\n');
      expect(transcriptAs('srt', 'verbose_json', verbose, 4)).toBe('1\n00:00:00,000 --> 00:00:01,250\nHello there.\n\n2\n00:00:01,250 --> 00:00:03,500\nGeneral Kenobi.\n\n');
      expect(transcriptAs('vtt', 'verbose_json', verbose, 4)).toBe('WEBVTT\n\n00:00:00.000 --> 00:00:01.250\nHello there.\n\n00:00:01.250 --> 00:00:03.500\nGeneral Kenobi.\n\n');
      expect(transcriptAs('verbose_json', 'verbose_json', verbose, 4)).toBe(verbose);
      expect(transcriptAs('text', 'json', { text: 'Hi', usage: { type: 'tokens', input_tokens: 1, output_tokens: 1 } }, null)).toBe('Hi\n');
    });
    it('one cue over the whole audio when the answer has no segments', () => {
      expect(transcriptAs('srt', 'verbose_json', { text: 'Hi', duration: 3661.5 }, 3661.5)).toBe('1\n00:00:00,000 --> 01:01:01,500\nHi\n\n');
    });
    it('measuringFormat and formatOverride', () => {
      expect(measuringFormat('srt', {}, 'whisper-large-v3')).toBe('verbose_json');
      expect(formatOverride('json', 'json')).toEqual({});
      expect(formatOverride('text', 'verbose_json')).toEqual({ response_format: 'verbose_json' });
    });
  });

  it('speech: the body passes through with the upstream model, without the gateway\'s `delivery`', () => {
    const req = openai.speechRequest({ model: 'openai/tts-1', input: 'hi', voice: 'alloy', response_format: 'wav', instructions: 'calm', delivery: 'stored' }, build('tts-1'));
    expect(req).toEqual({ method: 'POST', path: '/audio/speech', body: { model: 'tts-1', input: 'hi', voice: 'alloy', response_format: 'wav', instructions: 'calm' } });
    expect(openai.speechRequest({ model: 'x', input: 'hi', voice: 'alloy' }, build('tts-1')).body).toEqual({ model: 'tts-1', input: 'hi', voice: 'alloy' });
  });

  it('parses a dall-e answer: base64, png, the revised prompt, no usage, no settings', () => {
    expect(openai.parseImages(FIXTURES.dallE3)).toEqual({
      created: 1_700_000_000,
      images: [{ b64_json: PNG_B64, mime_type: 'image/png', revised_prompt: 'A red fox, photographed at dusk' }],
      usage: null,
      settings: {},
    });
  });

  it('parses a gpt-image answer: the type from output_format, token usage, the settings passed on', () => {
    const result = openai.parseImages(FIXTURES.gptImage);
    expect(result.images.map((i) => i.mime_type)).toEqual(['image/jpeg', 'image/jpeg']);
    expect(result.usage).toEqual({ input_tokens: 3, input_tokens_details: { text_tokens: 3, image_tokens: 0 }, output_tokens: 816, total_tokens: 819 });
    expect(result.settings).toEqual({ background: 'opaque', output_format: 'jpeg', quality: 'low', size: '1536x1024' });
    expect(openai.parseImages({ ...FIXTURES.gptImage, output_format: 'webp' }).images[0]!.mime_type).toBe('image/webp');
    expect(openai.parseImages({ ...FIXTURES.gptImage, output_format: 'png' }).images[0]!.mime_type).toBe('image/png');
  });

  it('an answer that does not state the type: the image\'s own mime_type (xAI), else the bytes (Together), else png', () => {
    expect(openai.parseImages(FIXTURES.xai).images).toEqual([{ b64_json: JPEG_B64, mime_type: 'image/jpeg', revised_prompt: 'A cat' }]);
    expect(openai.parseImages(FIXTURES.together).images[0]!.mime_type).toBe('image/jpeg');
    expect(openai.parseImages({ data: [{ b64_json: WEBP_B64 }] }).images[0]!.mime_type).toBe('image/webp');
    expect(openai.parseImages({ data: [{ b64_json: 'AAAA' }] }).images[0]!.mime_type).toBe('image/png');
  });

  it('created is now when the answer has none', () => {
    const before = Math.floor(Date.now() / 1000);
    expect(openai.parseImages(FIXTURES.xai).created).toBeGreaterThanOrEqual(before);
  });

  it('throws on an answer without base64 data', () => {
    expect(() => openai.parseImages(FIXTURES.urlOnly)).toThrow(/no base64/);
    expect(() => openai.parseImages({ data: [{ b64_json: PNG_B64 }, { url: 'https://x' }] })).toThrow(/Image 1/);
    expect(() => openai.parseImages({ data: [] })).toThrow(/no images/);
    expect(() => openai.parseImages({ created: 1 })).toThrow(/no images/);
    expect(() => openai.parseImages(null)).toThrow(/not a JSON object/);
  });

  describe('transcriptions', () => {
    it('json (whisper): the object as sent, duration usage kept', () => {
      expect(openai.parseTranscription('json', JSON.stringify(FIXTURES.whisperJson))).toEqual({ body: FIXTURES.whisperJson, usage: { type: 'duration', seconds: 3 } });
    });

    it('json (gpt-4o-transcribe): token usage in MediaTokenUsage\'s shape', () => {
      expect(openai.parseTranscription('json', JSON.stringify(FIXTURES.gpt4oJson))).toEqual({
        body: FIXTURES.gpt4oJson,
        usage: { input_tokens: 32, input_token_details: { text_tokens: 2, audio_tokens: 30 }, output_tokens: 3, total_tokens: 35 },
      });
    });

    it('verbose_json: its usage, else its duration', () => {
      expect(openai.parseTranscription('verbose_json', JSON.stringify(FIXTURES.verbose)).usage).toEqual({ type: 'duration', seconds: 3 });
      expect(openai.parseTranscription('verbose_json', JSON.stringify(FIXTURES.verboseNoUsage))).toEqual({ body: FIXTURES.verboseNoUsage, usage: { type: 'duration', seconds: 2.51 } });
    });

    it('json without usage: null (priced by the measured duration)', () => {
      expect(openai.parseTranscription('json', '{"text":"hi"}')).toEqual({ body: { text: 'hi' }, usage: null });
      expect(openai.parseTranscription('json', '{"text":"hi","usage":{"type":"tokens"}}').usage).toBeNull();
    });

    it.each(['text', 'srt', 'vtt'] as const)('%s: the body is the text, no usage', (format) => {
      const text = format === 'vtt' ? 'WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nHi\n' : format === 'srt' ? '1\n00:00:00,000 --> 00:00:01,000\nHi\n' : 'Hi\n';
      expect(openai.parseTranscription(format, text)).toEqual({ body: text, usage: null });
    });

    it('throws on a JSON format that is not a JSON object', () => {
      expect(() => openai.parseTranscription('json', 'Hello there.')).toThrow(/not JSON/);
      expect(() => openai.parseTranscription('verbose_json', '[1]')).toThrow(/not a JSON object/);
    });
  });
});

describe('Azure OpenAI media adapter', () => {
  it('addresses the deployment (the model name), with api-version from the connection or 2024-10-21', () => {
    expect(azure.imagesRequest({ model: 'x', prompt: 'a boat' }, build('my images/1'))).toEqual({
      method: 'POST',
      path: '/deployments/my%20images%2F1/images/generations',
      query: { 'api-version': '2024-10-21' },
      body: { model: 'my images/1', prompt: 'a boat', response_format: 'b64_json' },
    });
    const config = { api_version: '2025-04-01-preview' };
    expect(azure.editRequest({}, build('gpt-image-1', config))).toEqual({ path: '/deployments/gpt-image-1/images/edits', query: { 'api-version': '2025-04-01-preview' }, overrides: { model: 'gpt-image-1', response_format: null } });
    expect(azure.transcriptionRequest({}, build('whisper', config))).toEqual({ path: '/deployments/whisper/audio/transcriptions', query: { 'api-version': '2025-04-01-preview' }, overrides: { model: 'whisper', response_format: 'verbose_json' } });
    const speech = azure.speechRequest({ model: 'x', input: 'hi', voice: 'alloy', delivery: 'stored' }, build('tts'));
    expect(speech).toMatchObject({ path: '/deployments/tts/audio/speech', query: { 'api-version': '2024-10-21' }, body: { model: 'tts', input: 'hi', voice: 'alloy' } });
    expect(speech.body).not.toHaveProperty('delivery');
    expect(azure.endpoints).toEqual(MEDIA_ENDPOINTS);
  });

  it('knows a gpt-image deployment by the model the client named when the deployment name does not say', () => {
    const options = { ...build('images-prod'), modelId: 'azure_openai/gpt-image-1' };
    expect(azure.imagesRequest({ model: 'x', prompt: 'a boat', response_format: 'url' }, options).body).not.toHaveProperty('response_format');
    expect(azure.editRequest({}, options).overrides).toEqual({ model: 'images-prod', response_format: null });
    expect(azure.imagesRequest({ model: 'x', prompt: 'a boat' }, { ...build('images-prod'), modelId: 'azure_openai/dall-e-3' }).body).toHaveProperty('response_format', 'b64_json');
  });
});

describe('Google Imagen media adapter', () => {
  it('images: one instance with the prompt; n as sampleCount (1 when absent); size as the aspect ratio', () => {
    expect(google.imagesRequest({ model: 'google/imagen-4.0-generate-001', prompt: 'a lighthouse', size: '1792x1024', n: 2, quality: 'hd', response_format: 'url' }, build('imagen-4.0-generate-001'))).toEqual({
      method: 'POST',
      path: '/models/imagen-4.0-generate-001:predict',
      body: { instances: [{ prompt: 'a lighthouse' }], parameters: { sampleCount: 2, aspectRatio: '16:9' } },
    });
    expect(google.imagesRequest({ model: 'x', prompt: 'p' }, build('imagen-3.0-generate-002')).body).toEqual({ instances: [{ prompt: 'p' }], parameters: { sampleCount: 1 } });
    expect(google.imagesRequest({ model: 'x', prompt: 'p', size: 'auto', personGeneration: 'dont_allow', imageSize: '2K' }, build('imagen-4.0-generate-001')).body).toEqual({
      instances: [{ prompt: 'p' }],
      parameters: { sampleCount: 1, personGeneration: 'dont_allow', imageSize: '2K' },
    });
  });

  it.each([
    ['1024x1024', '1:1'], ['256x256', '1:1'], ['1792x1024', '16:9'], ['1024x1792', '9:16'], ['1536x1024', '4:3'], ['1024x1536', '3:4'],
    ['1280x896', '4:3'], ['2048x1024', '16:9'], ['16:9', '16:9'], ['auto', undefined], [undefined, undefined], ['big', undefined], ['0x100', undefined],
  ])('size %s -> aspect ratio %s', (size, ratio) => {
    expect(imagenAspectRatio(size)).toBe(ratio);
  });

  it('parses predictions: base64 and type as given, created now, no usage', () => {
    const before = Math.floor(Date.now() / 1000);
    const result = google.parseImages(FIXTURES.imagen);
    expect(result.images).toEqual([{ b64_json: PNG_B64, mime_type: 'image/png' }, { b64_json: JPEG_B64, mime_type: 'image/jpeg' }]);
    expect(result.usage).toBeNull();
    expect(result.settings).toEqual({});
    expect(result.created).toBeGreaterThanOrEqual(before);
    expect(result.created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
  });

  it('serves the predictions the safety filter left; throws when none has base64', () => {
    expect(google.parseImages({ predictions: [{ raiFilteredReason: 'blocked' }, { bytesBase64Encoded: PNG_B64, mimeType: 'image/png' }] }).images).toHaveLength(1);
    expect(() => google.parseImages({ predictions: [{ raiFilteredReason: 'Unable to show generated images.' }] })).toThrow(/Unable to show/);
    expect(() => google.parseImages({})).toThrow(/no base64/);
    expect(() => google.parseImages(null)).toThrow(/no base64/);
  });

  it('offers images.generations and embeddings only; the other methods throw', () => {
    expect(google.endpoints).toEqual(['images.generations', 'embeddings']);
    expect(() => google.editRequest({}, build('imagen-3.0-generate-002'))).toThrow();
    expect(() => google.transcriptionRequest({}, build('x'))).toThrow();
    expect(() => google.parseTranscription('json', '{}')).toThrow();
    expect(() => google.speechRequest({ model: 'x' }, build('x'))).toThrow();
  });
});

describe('which kinds serve which endpoints', () => {
  const served = (kind: ProviderKind) => MEDIA_ENDPOINTS.filter((e) => mediaAdapterFor(kind, e) !== null);

  it('follows the table', () => {
    expect(served('openai')).toEqual(MEDIA_ENDPOINTS);
    expect(served('azure_openai')).toEqual(MEDIA_ENDPOINTS);
    expect(served('custom')).toEqual(MEDIA_ENDPOINTS);
    expect(served('google')).toEqual(['images.generations', 'embeddings']);
    expect(served('groq')).toEqual(['audio.transcriptions', 'audio.speech']);
    expect(served('together')).toEqual(['images.generations', 'embeddings']);
    expect(served('xai')).toEqual(['images.generations']);
    expect(served('mistral')).toEqual(['embeddings']);
    expect(served('fireworks')).toEqual(['embeddings']);
    for (const kind of ['deepseek', 'cerebras', 'perplexity', 'openrouter', 'anthropic'] as const) {
      expect(served(kind)).toEqual([]);
      expect(MEDIA_ADAPTERS[kind]).toBeUndefined();
    }
  });

  it('names every kind (a kind added to kinds.ts must be placed in the table)', () => {
    const named = new Set<string>(['openai', 'azure_openai', 'google', ...Object.keys(COMPATIBLE_MEDIA_ENDPOINTS)]);
    expect([...named].sort()).toEqual([...PROVIDER_KINDS].sort());
  });

  it('compatible kinds use the plain OpenAI paths; a builder for an endpoint the kind lacks throws', () => {
    const groq = mediaAdapterFor('groq', 'audio.transcriptions')!;
    expect(groq.transcriptionRequest({}, build('whisper-large-v3'))).toEqual({ path: '/audio/transcriptions', overrides: { model: 'whisper-large-v3', response_format: 'verbose_json' } });
    expect(() => groq.imagesRequest({ model: 'x', prompt: 'p' }, build('x'))).toThrow(/no images.generations/);
    expect(mediaAdapterFor('xai', 'images.generations')!.imagesRequest({ model: 'x', prompt: 'p', n: 2 }, build('grok-2-image')).body).toEqual({ model: 'grok-2-image', prompt: 'p', n: 2, response_format: 'b64_json' });
    expect(openAiCompatibleMediaAdapter([]).endpoints).toEqual([]);
  });
});

/** What the sandbox (and so the real API) makes of the builders' output. */
describe('against the sandbox', () => {
  const KEY = 'sk-sandbox-media-adapters';
  let sandbox: Sandbox;
  let spool: string;
  beforeAll(async () => {
    sandbox = await startSandbox();
    spool = await mkdtemp(path.join(tmpdir(), 'media-adapters-'));
  });
  afterAll(async () => {
    await sandbox.close();
    await rm(spool, { recursive: true, force: true });
  });

  const base = { openai: () => `${sandbox.url}/openai/v1`, azure_openai: () => `${sandbox.url}/azure/openai`, google: () => `${sandbox.url}/google/v1beta` };
  type Flavor = keyof typeof base;
  const urlOf = (flavor: Flavor, req: { path: string; query?: Record<string, string> }) => `${base[flavor]()}${req.path}${req.query ? `?${new URLSearchParams(req.query).toString()}` : ''}`;

  async function sendJson(flavor: Flavor, req: UpstreamRequest) {
    const res = await fetch(urlOf(flavor, req), { method: req.method ?? 'POST', headers: { ...credentialHeaders(flavor, KEY), 'content-type': 'application/json' }, body: JSON.stringify(req.body) });
    return { status: res.status, res };
  }

  let fileCount = 0;
  async function spooled(fields: Record<string, string | string[]>, files: Array<{ field: string; filename: string; contentType: string; bytes: Buffer }>) {
    const written: SpooledFile[] = [];
    for (const f of files) {
      const at = path.join(spool, `part-${(fileCount += 1)}`);
      await writeFile(at, f.bytes);
      written.push({ field: f.field, filename: f.filename, contentType: f.contentType, path: at, size: f.bytes.length });
    }
    return { fields, files: written };
  }

  async function sendMultipart(flavor: Flavor, req: MultipartUpstream, form: Awaited<ReturnType<typeof spooled>>) {
    const res = await fetch(urlOf(flavor, req), { method: 'POST', headers: credentialHeaders(flavor, KEY), body: await multipartForward(form, req.overrides) });
    return { status: res.status, res };
  }

  const lastBody = () => sandbox.received.at(-1)!.body;

  it('images: a dall-e client asking a link gets base64; gpt-image asking response_format is not refused', async () => {
    for (const [model, extra] of [['dall-e-3', { size: '1792x1024', style: 'natural' }], ['dall-e-2', { n: 2, size: '256x256' }], ['gpt-image-1', { quality: 'low', output_format: 'png' }]] as const) {
      const { status, res } = await sendJson('openai', openai.imagesRequest({ model: `openai/${model}`, prompt: 'a red fox', response_format: 'url', ...extra }, build(model)));
      expect(status).toBe(200);
      const result = openai.parseImages(await res.json());
      expect(result.images.length).toBeGreaterThan(0);
      for (const image of result.images) expect(Buffer.from(image.b64_json, 'base64').subarray(1, 4).toString('latin1')).toBe('PNG');
      expect(result.images.every((i) => i.mime_type === 'image/png')).toBe(true);
      if (model === 'gpt-image-1') {
        expect(result.usage).toMatchObject({ output_tokens: 272 });
        expect(result.settings).toMatchObject({ output_format: 'png', quality: 'low' });
      } else {
        expect(result.usage).toBeNull();
      }
      if (model === 'dall-e-3') expect(result.images[0]!.revised_prompt).toContain('a red fox');
    }
  });

  it('images on an Azure deployment', async () => {
    const { status, res } = await sendJson('azure_openai', azure.imagesRequest({ model: 'azure/dall-e-3', prompt: 'a boat', response_format: 'url' }, build('dall-e-3')));
    expect(status).toBe(200);
    expect(azure.parseImages(await res.json()).images).toHaveLength(1);
    expect(sandbox.received.at(-1)!.path).toBe('/azure/openai/deployments/dall-e-3/images/generations?api-version=2024-10-21');
  });

  it('edits: dall-e-2 asked base64 over the client\'s url; gpt-image-1 without response_format', async () => {
    const image = { field: 'image', filename: 'in.png', contentType: 'image/png', bytes: png(64, 64) };
    const mask = { field: 'mask', filename: 'mask.png', contentType: 'image/png', bytes: png(64, 64, [0, 0, 0, 0]) };
    const dalle = await sendMultipart('openai', openai.editRequest({}, build('dall-e-2')), await spooled({ model: 'openai/dall-e-2', prompt: 'add a hat', response_format: 'url', n: '2' }, [image, mask]));
    expect(dalle.status).toBe(200);
    expect(openai.parseImages(await dalle.res.json()).images).toHaveLength(2);
    expect(lastBody()).toMatchObject({ model: 'dall-e-2', response_format: 'b64_json' });

    const gpt = await sendMultipart('openai', openai.editRequest({}, build('gpt-image-1')), await spooled({ model: 'gpt-image-1', prompt: 'add a hat', response_format: 'b64_json' }, [{ ...image, field: 'image[]' }, { ...image, field: 'image[]' }]));
    expect(gpt.status).toBe(200);
    const result = openai.parseImages(await gpt.res.json());
    expect(result.usage?.input_tokens_details).toMatchObject({ image_tokens: 130 });
    expect(lastBody()).not.toHaveProperty('response_format');

    const onAzure = await sendMultipart('azure_openai', azure.editRequest({}, build('gpt-image-1')), await spooled({ prompt: 'add a hat', response_format: 'url' }, [image]));
    expect(onAzure.status).toBe(200);
  });

  it('transcriptions in each format, asked upstream in one that states the length, parsed, rendered as asked; token usage for gpt-4o-transcribe; an Azure deployment', async () => {
    const audio = { field: 'file', filename: 'speech.wav', contentType: 'audio/wav', bytes: wav(60000) };
    const measured = { type: 'duration', seconds: 3 };
    const tokens = { input_tokens: 25, input_token_details: { text_tokens: 0, audio_tokens: 25 }, output_tokens: 10, total_tokens: 35 };
    const cases = [
      ['whisper-1', 'json', measured],
      ['whisper-1', 'verbose_json', measured],
      ['whisper-1', 'text', measured],
      ['whisper-1', 'srt', measured],
      ['whisper-1', 'vtt', measured],
      ['gpt-4o-transcribe', 'json', tokens],
      ['gpt-4o-transcribe', 'text', tokens],
    ] as const;
    for (const [model, format, usage] of cases) {
      const fields = { model: `openai/${model}`, response_format: format };
      const req = openai.transcriptionRequest(fields, build(model));
      const upstream = (req.overrides.response_format as TranscriptionFormat | undefined) ?? format;
      const { status, res } = await sendMultipart('openai', req, await spooled(fields, [audio]));
      expect(status).toBe(200);
      const result = openai.parseTranscription(upstream, await res.text());
      expect(result.usage).toEqual(usage);
      const body = transcriptAs(format, upstream, result.body, null);
      if (typeof body === 'string') expect(body).toContain('2.5 seconds');
      else expect(body.text).toContain('2.5 seconds');
      if (format === 'srt') expect(body).toMatch(/^1\n00:00:00,000 --> /);
    }
    const onAzure = await sendMultipart('azure_openai', azure.transcriptionRequest({ response_format: 'text' }, build('whisper-1')), await spooled({ response_format: 'text' }, [audio]));
    expect(onAzure.status).toBe(200);
    expect(azure.parseTranscription('verbose_json', await onAzure.res.text()).usage).toEqual(measured);
  });

  it('speech: accepted, without the gateway\'s `delivery`', async () => {
    for (const flavor of ['openai', 'azure_openai'] as const) {
      const adapter = flavor === 'openai' ? openai : azure;
      const { status, res } = await sendJson(flavor, adapter.speechRequest({ model: 'openai/tts-1', input: 'Hello.', voice: 'alloy', response_format: 'wav', delivery: 'stored' }, build('tts-1')));
      expect(status).toBe(200);
      expect(res.headers.get('content-type')).toBe('audio/wav');
      await res.arrayBuffer();
      expect(lastBody()).toEqual({ model: 'tts-1', input: 'Hello.', voice: 'alloy', response_format: 'wav' });
    }
  });

  it('Imagen: one image unless n says more, at the aspect ratio the size maps to', async () => {
    for (const [size, n, count, width] of [['1792x1024', undefined, 1, 1408], ['1024x1536', 2, 2, 896], [undefined, undefined, 1, 1024]] as const) {
      const { status, res } = await sendJson('google', google.imagesRequest({ model: 'google/imagen-4.0-generate-001', prompt: 'a lighthouse', ...(size && { size }), ...(n && { n }) }, build('imagen-4.0-generate-001')));
      expect(status).toBe(200);
      const result = google.parseImages(await res.json());
      expect(result.images).toHaveLength(count);
      expect(Buffer.from(result.images[0]!.b64_json, 'base64').readUInt32BE(16)).toBe(width);
    }
  });

  it.each(MEDIA_ENDPOINTS)('every %s builder of an adapter that offers it names a path the sandbox routes', (endpoint: MediaEndpoint) => {
    for (const [kind, adapter] of Object.entries({ openai, azure_openai: azure, google }) as Array<[Flavor, typeof openai]>) {
      if (!adapter.endpoints.includes(endpoint)) continue;
      const embedding = () => adapter.embeddingsRequest({ input: ['p'], extra: {} }, build('m')) as UpstreamRequest;
      const req = endpoint === 'images.generations' ? adapter.imagesRequest({ model: 'm', prompt: 'p' }, build('m'))
        : endpoint === 'images.edits' ? adapter.editRequest({}, build('m'))
          : endpoint === 'audio.transcriptions' ? adapter.transcriptionRequest({}, build('m'))
            : endpoint === 'embeddings' ? embedding()
              : adapter.speechRequest({ model: 'm' }, build('m'));
      const google = endpoint === 'embeddings' ? /^\/google\/v1beta\/models\/m:batchEmbedContents$/ : /^\/google\/v1beta\/models\/m:predict$/;
      expect(new URL(urlOf(kind, req)).pathname).toMatch(kind === 'google' ? google : /\/(images\/generations|images\/edits|audio\/transcriptions|audio\/speech|embeddings)$/);
    }
  });
});
