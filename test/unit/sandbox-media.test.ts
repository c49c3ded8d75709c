import { crc32, inflateSync } from 'node:zlib';
import OpenAI, { toFile } from 'openai';
import { mp3, mp3Frames, png, speechSamples, wav } from '../../sandbox/files';
import { startSandbox, type Sandbox } from '../../sandbox/server';

/**
 * The sandbox's image and audio wires (issue 14 groundwork): OpenAI images/generations,
 * images/edits (multipart), audio/transcriptions (multipart), audio/speech (streamed bytes),
 * Azure deployment paths, Gemini Imagen `:predict`; real files; failure directives; what
 * `received` records.
 */
const KEY = 'sk-sandbox-media';

/** Checks a PNG completely: signature, every chunk's CRC, IHDR, inflated IDAT size, IEND last. */
function checkPng(bytes: Buffer): { width: number; height: number } {
  expect(bytes.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  let at = 8;
  const types: string[] = [];
  const idat: Buffer[] = [];
  let width = 0;
  let height = 0;
  while (at < bytes.length) {
    const length = bytes.readUInt32BE(at);
    const type = bytes.toString('latin1', at + 4, at + 8);
    const data = bytes.subarray(at + 8, at + 8 + length);
    expect(crc32(bytes.subarray(at + 4, at + 8 + length)) >>> 0).toBe(bytes.readUInt32BE(at + 8 + length));
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      expect([data[8], data[9]]).toEqual([8, 6]);
    }
    if (type === 'IDAT') idat.push(data);
    types.push(type);
    at += 12 + length;
  }
  expect(types[0]).toBe('IHDR');
  expect(types.at(-1)).toBe('IEND');
  expect(inflateSync(Buffer.concat(idat)).length).toBe(height * (1 + width * 4));
  return { width, height };
}

/** A WAV's format and duration in seconds, from its header. */
function checkWav(bytes: Buffer): { rate: number; channels: number; bits: number; seconds: number } {
  expect(bytes.toString('latin1', 0, 4)).toBe('RIFF');
  expect(bytes.readUInt32LE(4)).toBe(bytes.length - 8);
  expect(bytes.toString('latin1', 8, 16)).toBe('WAVEfmt ');
  expect(bytes.readUInt16LE(20)).toBe(1);
  expect(bytes.toString('latin1', 36, 40)).toBe('data');
  const dataSize = bytes.readUInt32LE(40);
  expect(dataSize).toBe(bytes.length - 44);
  return { rate: bytes.readUInt32LE(24), channels: bytes.readUInt16LE(22), bits: bytes.readUInt16LE(34), seconds: dataSize / bytes.readUInt32LE(28) };
}

/** Walks MPEG-1 Layer III frames, checking each header's bits; answers the frame count and the Info frame's count. */
function checkMp3(bytes: Buffer): { frames: number; infoFrames: number } {
  let at = 0;
  let frames = 0;
  let infoFrames = -1;
  while (at < bytes.length) {
    const h = bytes.readUInt32BE(at);
    expect(h >>> 21).toBe(0x7ff); // frame sync
    expect((h >>> 19) & 3).toBe(3); // MPEG-1
    expect((h >>> 17) & 3).toBe(1); // Layer III
    const bitrate = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320][(h >>> 12) & 15]!;
    const rate = [44100, 48000, 32000][(h >>> 10) & 3]!;
    expect(bitrate).toBeGreaterThan(0);
    const size = Math.floor((144 * bitrate * 1000) / rate) + ((h >>> 9) & 1);
    const mono = ((h >>> 6) & 3) === 3;
    const tag = at + 4 + (mono ? 17 : 32);
    if (frames === 0 && bytes.toString('latin1', tag, tag + 4) === 'Info') infoFrames = bytes.readUInt32BE(tag + 8);
    frames += 1;
    at += size;
  }
  expect(at).toBe(bytes.length);
  return { frames, infoFrames };
}

describe('sandbox media wires', () => {
  let sandbox: Sandbox;
  let sdk: OpenAI;

  beforeAll(async () => {
    sandbox = await startSandbox();
    sdk = new OpenAI({ apiKey: KEY, baseURL: `${sandbox.url}/openai/v1`, maxRetries: 0 });
  });
  afterAll(() => sandbox.close());

  const last = () => sandbox.received.at(-1)!;

  describe('images/generations', () => {
    it('dall-e-3 answers a signed url on the sandbox; the link downloads a valid PNG of the size; a tampered link is 403', async () => {
      const answer = await sdk.images.generate({ model: 'dall-e-3', prompt: 'a red fox', size: '1792x1024', quality: 'hd', style: 'natural' });
      expect(answer.data).toHaveLength(1);
      expect(answer.data![0]!.revised_prompt).toContain('a red fox');
      const url = answer.data![0]!.url!;
      expect(url.startsWith(`${sandbox.url}/blob/img-`)).toBe(true);
      const got = await fetch(url);
      expect(got.status).toBe(200);
      expect(got.headers.get('content-type')).toBe('image/png');
      expect(checkPng(Buffer.from(await got.arrayBuffer()))).toEqual({ width: 1792, height: 1024 });
      const tampered = await fetch(url.replace(/sig=(.)/, (_, c: string) => `sig=${c === '0' ? '1' : '0'}`));
      expect(tampered.status).toBe(403);
      expect(sandbox.received.find((r) => r.path === '/openai/v1/images/generations' && r.body?.prompt === 'a red fox')!.body).toMatchObject({ model: 'dall-e-3', prompt: 'a red fox', size: '1792x1024', quality: 'hd', style: 'natural' });
    });

    it('dall-e-2 answers b64_json for n images', async () => {
      const answer = await sdk.images.generate({ model: 'dall-e-2', prompt: 'a cat', n: 3, size: '256x256', response_format: 'b64_json' });
      expect(answer.data).toHaveLength(3);
      for (const d of answer.data!) expect(checkPng(Buffer.from(d.b64_json!, 'base64'))).toEqual({ width: 256, height: 256 });
      expect(answer.usage).toBeUndefined();
    });

    it('gpt-image-1 always answers b64_json with settings and token usage', async () => {
      const answer = await sdk.images.generate({ model: 'gpt-image-1', prompt: 'three small boats', n: 2, size: '1536x1024', quality: 'low', background: 'transparent', output_format: 'png' });
      expect(answer.data).toHaveLength(2);
      expect(checkPng(Buffer.from(answer.data![0]!.b64_json!, 'base64'))).toEqual({ width: 1536, height: 1024 });
      expect(answer).toMatchObject({ background: 'transparent', output_format: 'png', quality: 'low', size: '1536x1024' });
      // 3 prompt words; 408 output tokens per low-quality landscape image.
      expect(answer.usage).toEqual({ input_tokens: 3, input_tokens_details: { text_tokens: 3, image_tokens: 0 }, output_tokens: 816, total_tokens: 819 });
    });

    it('refuses what the real API refuses', async () => {
      await expect(sdk.images.generate({ model: 'gpt-image-1', prompt: 'x', response_format: 'url' })).rejects.toMatchObject({ status: 400, param: 'response_format' });
      await expect(sdk.images.generate({ model: 'dall-e-3', prompt: 'x', n: 2 })).rejects.toMatchObject({ status: 400, param: 'n' });
      await expect(sdk.images.generate({ model: 'dall-e-2', prompt: 'x', size: '1792x1024' })).rejects.toMatchObject({ status: 400, param: 'size' });
      await expect(sdk.images.generate({ model: 'openai/dall-e-3', prompt: 'x' })).rejects.toMatchObject({ status: 400, param: 'model' });
    });

    it('a directive in the prompt fails the first request only (times=1); a connection prefix fails every one', async () => {
      const prompt = 'a dog [sandbox status=503 times=1 retry_after=2]';
      const first = await fetch(`${sandbox.url}/openai/v1/images/generations`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'dall-e-2', prompt }) });
      expect(first.status).toBe(503);
      expect(first.headers.get('retry-after')).toBe('2');
      expect(((await first.json()) as { error: { type: string } }).error.type).toBe('server_error');
      await expect(sdk.images.generate({ model: 'dall-e-2', prompt })).resolves.toHaveProperty('data');
      const failing = new OpenAI({ apiKey: KEY, baseURL: `${sandbox.url}/x/status=429/openai/v1`, maxRetries: 0 });
      await expect(failing.images.generate({ model: 'dall-e-2', prompt: 'x' })).rejects.toMatchObject({ status: 429 });
      await expect(failing.images.generate({ model: 'dall-e-2', prompt: 'x' })).rejects.toMatchObject({ status: 429 });
      await expect(sdk.images.generate({ model: 'dall-e-2', prompt: 'x [sandbox moderation]' })).rejects.toMatchObject({ status: 400, code: 'content_policy_violation' });
    });

    it('refuses a wrong key the OpenAI way', async () => {
      const wrong = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${sandbox.url}/openai/v1`, maxRetries: 0 });
      await expect(wrong.images.generate({ model: 'dall-e-2', prompt: 'x' })).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' });
    });

    it('serves Azure deployments (model from the path, api-key header)', async () => {
      const res = await fetch(`${sandbox.url}/azure/openai/deployments/dall-e-3/images/generations?api-version=2024-10-21`, { method: 'POST', headers: { 'api-key': KEY, 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'a boat', response_format: 'b64_json' }) });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { data: Array<{ b64_json: string }> };
      expect(checkPng(Buffer.from(body.data[0]!.b64_json, 'base64'))).toEqual({ width: 1024, height: 1024 });
    });
  });

  describe('images/edits (multipart)', () => {
    it('dall-e-2 with a mask through the SDK: validated PNGs, recorded as field names and file metadata', async () => {
      const image = png(64, 64);
      const mask = png(64, 64, [0, 0, 0, 0]);
      const answer = await sdk.images.edit({
        model: 'dall-e-2', prompt: 'add a hat', n: 2, size: '512x512', response_format: 'b64_json',
        image: await toFile(image, 'photo.png', { type: 'image/png' }), mask: await toFile(mask, 'mask.png', { type: 'image/png' }),
      });
      expect(answer.data).toHaveLength(2);
      expect(checkPng(Buffer.from(answer.data![0]!.b64_json!, 'base64'))).toEqual({ width: 512, height: 512 });
      const r = last();
      expect(r.path).toBe('/openai/v1/images/edits');
      expect(r.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
      expect(r.body).toMatchObject({ model: 'dall-e-2', prompt: 'add a hat', n: '2', size: '512x512', response_format: 'b64_json' });
      expect(r.multipart!.fields.sort()).toEqual(['model', 'n', 'prompt', 'response_format', 'size']);
      expect(r.multipart!.files).toEqual([
        { field: 'image', filename: 'photo.png', contentType: 'image/png', size: image.length },
        { field: 'mask', filename: 'mask.png', contentType: 'image/png', size: mask.length },
      ]);
    });

    it('gpt-image-1 takes several images as image[] and counts them in usage', async () => {
      const answer = await sdk.images.edit({
        model: 'gpt-image-1', prompt: 'merge these', quality: 'high',
        image: [await toFile(png(32, 32), 'a.png', { type: 'image/png' }), await toFile(png(16, 16), 'b.png', { type: 'image/png' })],
      });
      expect(checkPng(Buffer.from(answer.data![0]!.b64_json!, 'base64'))).toEqual({ width: 1024, height: 1024 });
      expect(answer.usage).toMatchObject({ input_tokens: 2 + 130, input_tokens_details: { text_tokens: 2, image_tokens: 130 }, output_tokens: 4160 });
      expect(last().multipart!.files.map((f) => f.field)).toEqual(['image[]', 'image[]']);
    });

    it('refuses what is not a PNG for dall-e-2, an unsupported mimetype for gpt-image-1, a non-multipart body', async () => {
      const jpegish = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]);
      await expect(sdk.images.edit({ model: 'dall-e-2', prompt: 'x', image: await toFile(jpegish, 'p.jpg', { type: 'image/jpeg' }) }))
        .rejects.toMatchObject({ status: 400, message: expect.stringContaining('must be a PNG') });
      await expect(sdk.images.edit({ model: 'gpt-image-1', prompt: 'x', image: await toFile(png(8, 8), 'p.png', { type: 'application/octet-stream' }) }))
        .rejects.toMatchObject({ status: 400, message: expect.stringContaining('unsupported mimetype') });
      await expect(sdk.images.edit({ model: 'dall-e-2', prompt: 'x', image: await toFile(png(16, 8), 'p.png', { type: 'image/png' }) }))
        .rejects.toMatchObject({ status: 400, message: expect.stringContaining('square') });
      const json = await fetch(`${sandbox.url}/openai/v1/images/edits`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: '{}' });
      expect(json.status).toBe(400);
    });

    it('reads directives from the prompt field, with plain fetch and FormData', async () => {
      const form = () => {
        const f = new FormData();
        f.append('model', 'dall-e-2');
        f.append('prompt', 'paint it [sandbox status=500 times=1]');
        f.append('image', new Blob([png(8, 8)], { type: 'image/png' }), 'x.png');
        return f;
      };
      const post = () => fetch(`${sandbox.url}/openai/v1/images/edits`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: form() });
      expect((await post()).status).toBe(500);
      const ok = await post();
      expect(ok.status).toBe(200);
      const url = ((await ok.json()) as { data: Array<{ url: string }> }).data[0]!.url;
      expect(checkPng(Buffer.from(await (await fetch(url)).arrayBuffer()))).toEqual({ width: 1024, height: 1024 });
    });
  });

  describe('audio/transcriptions (multipart)', () => {
    // 2.5 seconds of 24 kHz audio.
    const audio = wav(60000);
    const file = () => toFile(audio, 'speech.wav', { type: 'audio/wav' });

    it('json (whisper-1): the text names the duration read from the file; usage in seconds', async () => {
      const t = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), language: 'en' });
      expect(t).toEqual({ text: 'This is the sandbox transcript. The audio lasts 2.5 seconds.', usage: { type: 'duration', seconds: 3 } });
      expect(last().multipart!.files).toEqual([{ field: 'file', filename: 'speech.wav', contentType: 'audio/wav', size: audio.length }]);
      expect(last().body).toMatchObject({ model: 'whisper-1', language: 'en' });
    });

    it('json (gpt-4o-transcribe): token usage', async () => {
      const t = await sdk.audio.transcriptions.create({ model: 'gpt-4o-transcribe', file: await file(), prompt: 'two words' });
      expect(t.usage).toEqual({ type: 'tokens', input_tokens: 27, input_token_details: { text_tokens: 2, audio_tokens: 25 }, output_tokens: 10, total_tokens: 37 });
    });

    it('text, srt and vtt as text', async () => {
      const text = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'text' });
      expect(text).toBe('This is the sandbox transcript. The audio lasts 2.5 seconds.\n');
      const srt = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'srt' });
      expect(srt).toBe('1\n00:00:00,000 --> 00:00:01,250\nThis is the sandbox transcript.\n\n2\n00:00:01,250 --> 00:00:02,500\nThe audio lasts 2.5 seconds.\n\n');
      const vtt = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'vtt' });
      expect(vtt).toBe('WEBVTT\n\n00:00:00.000 --> 00:00:01.250\nThis is the sandbox transcript.\n\n00:00:01.250 --> 00:00:02.500\nThe audio lasts 2.5 seconds.\n\n');
    });

    it('verbose_json with segments, and words when asked', async () => {
      const plain = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'verbose_json' });
      expect(plain).toMatchObject({ task: 'transcribe', language: 'english', duration: 2.5, text: expect.any(String) });
      expect(plain.segments).toHaveLength(2);
      expect(plain.segments![1]).toMatchObject({ id: 1, start: 1.25, end: 2.5, text: ' The audio lasts 2.5 seconds.' });
      expect(plain.words).toBeUndefined();
      const both = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'verbose_json', timestamp_granularities: ['word', 'segment'] });
      expect(both.words).toHaveLength(10);
      expect(both.words![0]).toEqual({ word: 'This', start: 0, end: 0.25 });
      expect(both.segments).toHaveLength(2);
      expect(last().body).toMatchObject({ 'timestamp_granularities[]': ['word', 'segment'] });
      const words = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'verbose_json', timestamp_granularities: ['word'] });
      expect(words.segments).toBeUndefined();
    });

    it('reads an MP3 duration; refuses formats a model does not offer, unknown file types; directives in the prompt', async () => {
      const mp3Answer = await sdk.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x'.repeat(48) });
      const mp3Bytes = Buffer.from(await mp3Answer.arrayBuffer());
      const t = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(mp3Bytes, 'a.mp3', { type: 'audio/mpeg' }) });
      // 48 characters: 2.4 s; 100 frames of 1152 samples at 48 kHz = 2.4 s.
      expect(t.text).toContain('2.4 seconds');
      await expect(sdk.audio.transcriptions.create({ model: 'gpt-4o-mini-transcribe', file: await file(), response_format: 'srt' })).rejects.toMatchObject({ status: 400, param: 'response_format' });
      await expect(sdk.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(audio, 'notes.txt', { type: 'text/plain' }) })).rejects.toMatchObject({ status: 400, param: 'file' });
      const err = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await file(), prompt: '[sandbox status=429 retry_after=7]' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.RateLimitError);
      expect((err as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
    });

    it('hears every MP3 frame, whatever its Info frame claims, and reports that duration on verbose_json (issue 20)', async () => {
      // 2,500 frames (60 s at 48 kHz) behind an Info frame claiming 42 (about 1 s).
      const lying = mp3(2500);
      lying.writeUInt32BE(42, 4 + 17 + 8);
      const t = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(lying, 'a.mp3', { type: 'audio/mpeg' }), response_format: 'verbose_json' });
      expect(t).toMatchObject({ duration: 60, usage: { type: 'duration', seconds: 60 } });
    });

    it('plain fetch with FormData; Azure deployment path', async () => {
      const f = new FormData();
      f.append('file', new Blob([audio], { type: 'audio/wav' }), 'a.wav');
      f.append('response_format', 'text');
      const res = await fetch(`${sandbox.url}/azure/openai/deployments/whisper-1/audio/transcriptions?api-version=2024-10-21`, { method: 'POST', headers: { 'api-key': KEY }, body: f });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toContain('2.5 seconds');
    });
  });

  describe('audio/speech', () => {
    it('mp3 through the SDK: valid MPEG-1 Layer III frames, duration from the input length', async () => {
      const input = 'Hello from the sandbox speech.';
      const res = await sdk.audio.speech.create({ model: 'tts-1', voice: 'alloy', input });
      expect(res.headers.get('content-type')).toBe('audio/mpeg');
      const bytes = Buffer.from(await res.arrayBuffer());
      const { frames, infoFrames } = checkMp3(bytes);
      expect(infoFrames).toBe(mp3Frames(speechSamples(input)));
      expect(frames).toBe(infoFrames + 1);
      expect(last().body).toEqual({ model: 'tts-1', voice: 'alloy', input });
    });

    it('wav: 24 kHz mono 16-bit, 50 ms a character divided by speed; streamed chunked', async () => {
      const input = 'x'.repeat(100);
      const res = await fetch(`${sandbox.url}/openai/v1/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'gpt-4o-mini-tts', voice: 'coral', input, response_format: 'wav', speed: 2 }) });
      expect(res.headers.get('content-type')).toBe('audio/wav');
      expect(res.headers.get('transfer-encoding')).toBe('chunked');
      expect(res.headers.get('content-length')).toBeNull();
      expect(checkWav(Buffer.from(await res.arrayBuffer()))).toEqual({ rate: 24000, channels: 1, bits: 16, seconds: 2.5 });
    });

    it('pcm and the other formats carry their content-types', async () => {
      const pcm = await sdk.audio.speech.create({ model: 'tts-1-hd', voice: 'nova', input: 'abcd', response_format: 'pcm' });
      expect(pcm.headers.get('content-type')).toBe('audio/pcm');
      expect((await pcm.arrayBuffer()).byteLength).toBe(speechSamples('abcd') * 2);
      for (const [format, type] of [['opus', 'audio/opus'], ['aac', 'audio/aac'], ['flac', 'audio/flac']] as const) {
        const r = await sdk.audio.speech.create({ model: 'tts-1', voice: 'echo', input: 'abc', response_format: format });
        expect(r.headers.get('content-type')).toBe(type);
      }
    });

    it('refuses a bad voice or speed; directives in the input; cut_after drops the stream', async () => {
      await expect(sdk.audio.speech.create({ model: 'tts-1', voice: 'nobody' as 'alloy', input: 'x' })).rejects.toMatchObject({ status: 400, param: 'voice' });
      await expect(sdk.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x', speed: 5 })).rejects.toMatchObject({ status: 400, param: 'speed' });
      await expect(sdk.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x [sandbox status=503]' })).rejects.toMatchObject({ status: 503 });
      const failing = new OpenAI({ apiKey: KEY, baseURL: `${sandbox.url}/x/status=500,times=1/openai/v1`, maxRetries: 0 });
      await expect(failing.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x' })).rejects.toMatchObject({ status: 500 });
      await expect(failing.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'x' })).resolves.toHaveProperty('status', 200);
      const cut = await sdk.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: `${'x'.repeat(2000)} [sandbox cut_after=1]`, response_format: 'wav' });
      await expect(cut.arrayBuffer()).rejects.toThrow();
    });
  });

  describe('Gemini Imagen :predict', () => {
    const predict = (model: string, body: unknown, key = KEY) => fetch(`${sandbox.url}/google/v1beta/models/${model}:predict`, { method: 'POST', headers: { 'x-goog-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body) });

    it('answers predictions of base64 PNGs sized by aspect ratio (sampleCount defaults to 4)', async () => {
      const res = await predict('imagen-4.0-generate-001', { instances: [{ prompt: 'a lighthouse' }], parameters: { aspectRatio: '16:9', sampleCount: 2 } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { predictions: Array<{ bytesBase64Encoded: string; mimeType: string }> };
      expect(body.predictions).toHaveLength(2);
      expect(body.predictions[0]!.mimeType).toBe('image/png');
      expect(checkPng(Buffer.from(body.predictions[0]!.bytesBase64Encoded, 'base64'))).toEqual({ width: 1408, height: 768 });
      const defaults = (await (await predict('imagen-3.0-generate-002', { instances: [{ prompt: 'x' }] })).json()) as { predictions: unknown[] };
      expect(defaults.predictions).toHaveLength(4);
    });

    it('refuses like Gemini: a wrong key, a bad sampleCount; directives in the prompt', async () => {
      const wrong = await predict('imagen-3.0-generate-002', { instances: [{ prompt: 'x' }] }, 'AIza-wrong');
      expect(wrong.status).toBe(400);
      expect(((await wrong.json()) as { error: { status: string } }).error.status).toBe('INVALID_ARGUMENT');
      expect((await predict('imagen-3.0-generate-002', { instances: [{ prompt: 'x' }], parameters: { sampleCount: 9 } })).status).toBe(400);
      const limited = await predict('imagen-3.0-generate-002', { instances: [{ prompt: 'x [sandbox status=429]' }] });
      expect(limited.status).toBe(429);
      expect(((await limited.json()) as { error: { status: string } }).error.status).toBe('RESOURCE_EXHAUSTED');
    });
  });

  describe('Gemini Veo long-running operations', () => {
    const veo = (path: string, init: RequestInit = {}) => fetch(`${sandbox.url}/google/v1beta/${path}`, { ...init, headers: { 'x-goog-api-key': KEY, 'content-type': 'application/json', ...init.headers } });
    const submit = (model: string, parameters: Record<string, unknown>) => veo(`models/${model}:predictLongRunning`, { method: 'POST', body: JSON.stringify({ instances: [{ prompt: 'waves [sandbox render_ms=20]' }], parameters }) });

    it('answers the finished operation as the Gemini API does: each sample\'s URI, no duration, resolution or aspect ratio', async () => {
      const before = sandbox.videoRenderedSeconds();
      const started = await submit('veo-3.0-generate-001', { sampleCount: 2, durationSeconds: 6 });
      expect(started.status).toBe(200);
      const { name } = (await started.json()) as { name: string };
      expect(name).toMatch(/^models\/veo-3\.0-generate-001\/operations\/[0-9a-f]+$/);
      await new Promise((r) => setTimeout(r, 60));
      const done = (await (await veo(name)).json()) as Record<string, unknown>;
      expect(done).toEqual({
        name,
        done: true,
        response: {
          '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse',
          generateVideoResponse: { generatedSamples: [{ video: { uri: expect.stringMatching(/:download\?alt=media$/) } }, { video: { uri: expect.stringMatching(/-1:download\?alt=media$/) } }] },
        },
      });
      // Two samples of 6 s rendered: what Google bills.
      expect(sandbox.videoRenderedSeconds() - before).toBe(12);
      const uri = ((done.response as { generateVideoResponse: { generatedSamples: Array<{ video: { uri: string } }> } }).generateVideoResponse.generatedSamples[1]!.video.uri);
      expect((await fetch(uri, { headers: { 'x-goog-api-key': KEY } })).status).toBe(200);
      // Unsaid, the length is 8 s.
      const plain = await submit('veo-3.0-generate-001', {});
      expect(plain.status).toBe(200);
      expect(sandbox.videoRenderedSeconds() - before).toBe(20);
    });

    it('refuses parameters the Gemini API refuses: an unknown one, a length or resolution the model does not take', async () => {
      for (const [model, parameters] of [
        ['veo-3.0-generate-001', { numberOfVideos: 2 }],
        ['veo-3.0-generate-001', { durationSeconds: 12 }],
        ['veo-2.0-generate-001', { resolution: '1080p' }],
        ['veo-3.0-generate-001', { sampleCount: 5 }],
      ] as const) {
        const res = await submit(model, parameters);
        expect(res.status).toBe(400);
        expect(((await res.json()) as { error: { status: string } }).error.status).toBe('INVALID_ARGUMENT');
      }
    });
  });
});
