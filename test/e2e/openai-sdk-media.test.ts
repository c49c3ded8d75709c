import { eq } from 'drizzle-orm';
import OpenAI, { toFile } from 'openai';
import { parseBuffer } from 'music-metadata';
import { requestLogs, spendLedger } from '../../core/db/schema';
import { mp3, png, pngInfo, speechSamples, wav } from '../../sandbox/files';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress } from '../helpers/harness';

/**
 * Issue 14, "Done when": the official `openai` SDK through the gateway to the sandbox, for
 * images (generate, edit with a mask), transcriptions in each format and speech (bytes and a
 * stored link); signed links; failover per endpoint; body limits; cost against hand-computed
 * list prices; a blocking budget.
 */
const MB = 1_000_000;
let seq = 0;
const tag = () => `t${Date.now()}${seq++}`;

/** A second of 24 kHz mono speech-like audio per `seconds` (the sandbox's WAV writer). */
const audio = (seconds: number) => wav(Math.round(24_000 * seconds));

describe('images and audio through the gateway with the openai SDK', () => {
  let f: ChatFixture;
  let secret: string;
  let sdk: OpenAI;

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    secret = await f.key({ rate_limit_rpm: 10_000 });
    sdk = new OpenAI({ apiKey: secret, baseURL: `${f.api.url}/v1`, maxRetries: 0, defaultHeaders: { 'x-forwarded-for': randomClientAddress() } });
  });
  afterAll(() => f.close());

  const logRow = async (id: string) => {
    await f.api.runtime.deps.gateway.requestLog.flush();
    const [row] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, id));
    return row!;
  };
  const download = (url: string) => fetch(url);

  describe('images/generations', () => {
    it('answers gateway-signed links (dall-e-3): the link downloads the PNG, download=1 names it after the request, tampering is 404', async () => {
      const { data: answer, response } = await sdk.images.generate({ model: 'dall-e-3', prompt: 'a red fox', size: '1792x1024', quality: 'hd' }).withResponse();
      const body = answer as unknown as Loose;
      const requestId = response.headers.get('x-gw-request-id')!;
      expect(body.id).toBe(requestId);
      expect(response.headers.get('x-ratelimit-limit')).toBe('10000');
      expect(body).toMatchObject({ provider: 'openai', connection: expect.stringMatching(/^conn_/), route: 'primary', route_name: null });
      // DALL-E 3 HD 1792x1024 lists at $0.12 an image.
      expect(body.usage).toMatchObject({ images: 1, cost: 0.12, price_source: 'list' });
      const url = answer.data![0]!.url!;
      expect(url.startsWith(`${f.api.url}/files/media/`)).toBe(true);
      expect(answer.data![0]!.revised_prompt).toContain('a red fox');
      expect(body.data[0].expires_at).toBeGreaterThan(Date.now() / 1000 + 23 * 3600);

      const file = await download(url);
      expect(file.status).toBe(200);
      expect(file.headers.get('content-type')).toBe('image/png');
      expect(file.headers.get('content-disposition')).toBeNull();
      expect(pngInfo(Buffer.from(await file.arrayBuffer()))).toMatchObject({ width: 1792, height: 1024 });

      const attachment = await download(`${url}&download=1`);
      expect(attachment.headers.get('content-disposition')).toBe(`attachment; filename="${requestId}.png"`);
      await attachment.arrayBuffer();

      const tampered = await download(url.replace(/sig=([0-9a-f])/, (_, c: string) => `sig=${c === '0' ? '1' : '0'}`));
      expect(tampered.status).toBe(404);
      expect(await tampered.json()).toMatchObject({ error: { type: 'not_found', code: null } });
      const later = await download(url.replace(/exp=(\d+)/, (_, exp: string) => `exp=${Number(exp) + 3600}`));
      expect(later.status).toBe(404);

      const row = await logRow(requestId);
      expect(row).toMatchObject({ endpoint: 'images.generations', status: 200, provider: 'openai', requestedModel: 'dall-e-3', cost: 0.12, priceSource: 'list' });
    });

    it('passes base64 inline when asked (gpt-image-1), priced by its token usage', async () => {
      const answer = await sdk.images.generate({ model: 'gpt-image-1', prompt: 'a small blue boat on a lake', response_format: 'b64_json', n: 2 } as OpenAI.ImageGenerateParamsNonStreaming);
      expect(answer.data).toHaveLength(2);
      for (const d of answer.data!) {
        expect(d.url).toBeUndefined();
        expect(pngInfo(Buffer.from(d.b64_json!, 'base64'))).toMatchObject({ width: 1024, height: 1024 });
      }
      const usage = answer.usage as unknown as Loose;
      // gpt-image-1 list prices: text input $5, image input $10, output $40 per million tokens.
      const expected = (usage.input_tokens_details.text_tokens * 5 + usage.input_tokens_details.image_tokens * 10 + usage.output_tokens * 40) / 1e6;
      expect(usage.output_tokens).toBeGreaterThan(0);
      expect(usage.cost).toBeCloseTo(expected, 9);
      expect(usage.price_source).toBe('list');
    });

    it('stores gpt-image-1 base64 and links it when no format is asked', async () => {
      const answer = await sdk.images.generate({ model: 'gpt-image-1', prompt: 'a lighthouse' });
      const url = answer.data![0]!.url!;
      expect(answer.data![0]!.b64_json).toBeUndefined();
      const file = await download(url);
      expect(pngInfo(Buffer.from(await file.arrayBuffer()))).not.toBeNull();
    });

    it('refuses an unknown model and a bad parameter with the spec error body', async () => {
      await expect(sdk.images.generate({ model: 'no-such-image-model', prompt: 'x' })).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
      await expect(sdk.images.generate({ model: 'dall-e-3', prompt: 'x', n: 11 })).rejects.toMatchObject({ status: 400, type: 'invalid_request_error' });
    });
  });

  describe('images/edits (multipart)', () => {
    it('edits with a mask: the provider gets both files, the answer is a link to the new PNG, priced per image', async () => {
      const image = await toFile(png(512, 512), 'photo.png', { type: 'image/png' });
      const mask = await toFile(png(512, 512, [0, 0, 0, 0]), 'mask.png', { type: 'image/png' });
      const { data: answer, response } = await sdk.images.edit({ model: 'dall-e-2', image, mask, prompt: 'add a hat', size: '512x512' }).withResponse();
      const received = f.sandbox.received.at(-1)!;
      expect(received.path).toBe('/openai/v1/images/edits');
      expect((received as Loose).multipart.files.map((x: Loose) => x.field).sort()).toEqual(['image', 'mask']);
      expect((answer as unknown as Loose).usage).toMatchObject({ images: 1, cost: 0.018, price_source: 'list' });
      const file = await download(answer.data![0]!.url!);
      expect(pngInfo(Buffer.from(await file.arrayBuffer()))).toMatchObject({ width: 512, height: 512 });
      const row = await logRow(response.headers.get('x-gw-request-id')!);
      expect(row).toMatchObject({ endpoint: 'images.edits', status: 200, cost: 0.018 });
    });

    it('answers 413 to a 52 MB edit and 400 to a body with one file over the per-file limit', async () => {
      const big = new FormData();
      big.append('model', 'dall-e-2');
      big.append('prompt', 'x');
      big.append('image', new Blob([Buffer.alloc(52 * MB)], { type: 'image/png' }), 'big.png');
      const tooLarge = await fetch(`${f.api.url}/v1/images/edits`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: big });
      expect(tooLarge.status).toBe(413);
      expect(await tooLarge.json()).toMatchObject({ error: { type: 'request_too_large' } });

      const oversized = new FormData();
      oversized.append('model', 'whisper-1');
      oversized.append('file', new Blob([Buffer.alloc(25 * MB + 1000)], { type: 'audio/wav' }), 'long.wav');
      const refused = await fetch(`${f.api.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: oversized });
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ error: { type: 'invalid_request_error', message: expect.stringContaining("'file'") } });
    });
  });

  describe('audio/transcriptions', () => {
    const seconds = 3;
    // whisper-1 lists at $0.006 a minute: $0.0001 a second.
    const cost = seconds * 0.0001;

    it.each(['json', 'verbose_json'] as const)('answers %s with usage, cost and the serving connection', async (format) => {
      const answer = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(audio(seconds), 'speech.wav', { type: 'audio/wav' }), response_format: format }) as unknown as Loose;
      expect(typeof answer.text).toBe('string');
      expect(answer.usage).toMatchObject({ cost: expect.closeTo(cost, 9), price_source: 'list' });
      expect(answer).toMatchObject({ provider: 'openai', route: 'primary' });
      if (format === 'verbose_json') expect(answer.segments.length).toBeGreaterThan(0);
    });

    it.each(['text', 'srt', 'vtt'] as const)('answers %s as text, cost in the headers', async (format) => {
      const { data, response } = await sdk.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(audio(seconds), 'speech.wav', { type: 'audio/wav' }), response_format: format }).withResponse();
      expect(typeof data).toBe('string');
      if (format === 'vtt') expect(data as unknown as string).toMatch(/^WEBVTT/);
      if (format === 'srt') expect(data as unknown as string).toMatch(/^1\r?\n00:00:00,000 --> /);
      expect(Number(response.headers.get('x-gw-cost'))).toBeCloseTo(cost, 9);
      expect(response.headers.get('x-gw-price-source')).toBe('list');
      expect(response.headers.get('x-gw-provider')).toBe('openai');
      const row = await logRow(response.headers.get('x-gw-request-id')!);
      expect(row).toMatchObject({ endpoint: 'audio.transcriptions', status: 200, priceSource: 'list' });
      expect(row.cost).toBeCloseTo(cost, 9);
    });
  });

  describe('audio/transcriptions held by what the file can hold, settled by what the provider heard (issue 20)', () => {
    /** 20 minutes of MP3 (50,000 frames of 96 bytes, 4.8 MB) whose Info frame claims 42 frames, about 1 s. */
    const lying = () => {
      const file = mp3(50_000);
      file.writeUInt32BE(42, 4 + 17 + 8);
      file.writeUInt32BE(43 * 96, 4 + 17 + 12);
      return file;
    };
    // whisper-1 lists at $0.0001 a second: 1,200 s heard is $0.12; the hold is the size's most, 4,801 s ($0.4801).
    const heard = 0.12;

    it('refuses a key whose room is below what the size can hold, whatever the header claims', async () => {
      const limited = await f.key({ credit_limit: { amount: 0.1, period: 'monthly' } });
      const client = new OpenAI({ apiKey: limited, baseURL: `${f.api.url}/v1`, maxRetries: 0 });
      await expect(client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(lying(), 'claims-one-second.mp3', { type: 'audio/mpeg' }), response_format: 'text' }))
        .rejects.toMatchObject({ status: 402, type: 'budget_exceeded', code: 'key_budget' });
    });

    it.each(['text', 'srt', 'vtt', 'json'] as const)('settles %s at the duration the provider reports, asked for in verbose_json', async (format) => {
      const limited = await f.key({ credit_limit: { amount: 1, period: 'monthly' } });
      const client = new OpenAI({ apiKey: limited, baseURL: `${f.api.url}/v1`, maxRetries: 0 });
      const { data, response } = await client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(lying(), 'claims-one-second.mp3', { type: 'audio/mpeg' }), response_format: format }).withResponse();
      const requestId = response.headers.get('x-gw-request-id')!;
      expect(Number(response.headers.get('x-gw-cost'))).toBeCloseTo(heard, 9);
      const text = typeof data === 'string' ? data : (data as unknown as Loose).text;
      expect(text).toContain('The audio lasts 1200 seconds.');
      if (format === 'text') expect(data).toBe('This is the sandbox transcript. The audio lasts 1200 seconds.\n');
      if (format === 'srt') expect(data).toMatch(/^1\n00:00:00,000 --> 00:10:00,000\nThis is the sandbox transcript\.\n\n2\n/);
      if (format === 'vtt') expect(data).toMatch(/^WEBVTT\n\n00:00:00\.000 --> /);
      if (format === 'json') expect(data as unknown as Loose).toMatchObject({ usage: { type: 'duration', seconds: 1200, cost: expect.closeTo(heard, 9) } });
      // The provider was asked for the format that reports the duration.
      const sent = f.sandbox.received.filter((r) => r.path === '/openai/v1/audio/transcriptions').at(-1)!;
      expect(sent.body?.response_format).toBe('verbose_json');
      const row = await logRow(requestId);
      expect(row.cost).toBeCloseTo(heard, 9);
      await f.settle();
      await f.api.runtime.deps.gateway.spendRows.flush();
      const rows = await f.database.db.select().from(spendLedger).where(eq(spendLedger.requestId, requestId));
      expect(rows.map((r) => Number(r.amount))).toEqual([heard]);
    });
  });

  describe('extension fields in multipart bodies', () => {
    it('reads routing (JSON text) from the form and never forwards it', async () => {
      const form = (routing: string) => {
        const body = new FormData();
        body.append('model', 'whisper-1');
        body.append('routing', routing);
        body.append('file', new Blob([audio(1)], { type: 'audio/wav' }), 'a.wav');
        return body;
      };
      const post = (body: FormData) => fetch(`${f.api.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body });
      const denied = await post(form(JSON.stringify({ providers: { deny: ['openai'] } })));
      expect(denied.status).toBe(503);
      expect(await denied.json()).toMatchObject({ error: { code: 'connection_out_of_scope' } });
      const unreadable = await post(form('{not json'));
      expect(unreadable.status).toBe(400);
      expect(await unreadable.json()).toMatchObject({ error: { type: 'invalid_request_error', param: 'routing' } });
      const allowed = await post(form(JSON.stringify({ providers: { allow: ['openai'] } })));
      expect(allowed.status).toBe(200);
      const sent = f.sandbox.received.at(-1)! as Loose;
      expect(sent.multipart.fields).not.toContain('routing');
    });
  });

  describe('audio/speech', () => {
    const input = 'Hello from the gateway, spoken aloud.';
    // tts-1 lists at $15 per million characters.
    const cost = input.length * 15 / 1e6;

    it('streams the audio bytes (SDK speech.create), cost in the headers', async () => {
      const { data, response } = await sdk.audio.speech.create({ model: 'tts-1', voice: 'alloy', input, response_format: 'wav' }).withResponse();
      const bytes = Buffer.from(await data.arrayBuffer());
      expect(response.headers.get('content-type')).toBe('audio/wav');
      const { format } = await parseBuffer(bytes, { mimeType: 'audio/wav' });
      expect(format.numberOfSamples).toBe(speechSamples(input));
      expect(Number(response.headers.get('x-gw-cost'))).toBeCloseTo(cost, 12);
      expect(response.headers.get('x-gw-price-source')).toBe('list');
    });

    it("stores the file with delivery: 'url' and answers {id, audio: {url, expires_at, mime_type}, usage}", async () => {
      const res = await fetch(`${f.api.url}/v1/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tts-1', voice: 'alloy', input, delivery: 'url' }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Loose;
      expect(body).toMatchObject({ id: res.headers.get('x-gw-request-id'), audio: { mime_type: 'audio/mpeg', url: expect.stringContaining('/files/media/') }, usage: { characters: input.length, price_source: 'list' } });
      expect(body.usage.cost).toBeCloseTo(cost, 12);
      const file = await download(`${body.audio.url}&download=1`);
      expect(file.headers.get('content-disposition')).toBe(`attachment; filename="${body.id}.mp3"`);
      const { format } = await parseBuffer(Buffer.from(await file.arrayBuffer()), { mimeType: 'audio/mpeg' });
      expect(format.container).toBe('MPEG');
    });
  });

  describe('failover between two connections', () => {
    async function routeOver(model: string, failing: string): Promise<{ slug: string; a: string; b: string }> {
      const a = await f.connect('openai', { directives: `status=503,${failing}` });
      const b = await f.connect('openai');
      const slug = `m-${tag()}`;
      const res = await f.client.post('/routes', { slug, targets: [{ connection_id: a, model }, { connection_id: b, model }], failover: { server_error: 'failover' } });
      if (res.status !== 201) throw new Error(JSON.stringify(res.body));
      await f.settle();
      return { slug, a, b };
    }
    const attemptsOf = async (id: string) => (await logRow(id)).attempts.map((x) => [x.connection_id, x.outcome]);

    it('images/generations', async () => {
      const failing = tag();
      const { slug, a, b } = await routeOver('dall-e-2', failing);
      const { data, response } = await sdk.images.generate({ model: slug, prompt: 'x' }).withResponse();
      expect(data as unknown as Loose).toMatchObject({ connection: b, route: 'standby_a', route_name: slug });
      expect(await attemptsOf(response.headers.get('x-gw-request-id')!)).toEqual([[a, 'server_error'], [b, 'ok']]);
    });

    it('images/edits (the spooled body is sent again to the next connection)', async () => {
      const failing = tag();
      const { slug, a, b } = await routeOver('dall-e-2', failing);
      const { data, response } = await sdk.images.edit({ model: slug, image: await toFile(png(256, 256), 'a.png', { type: 'image/png' }), prompt: 'x', size: '256x256' }).withResponse();
      expect(data as unknown as Loose).toMatchObject({ connection: b, route: 'standby_a' });
      const sent = f.sandbox.received.filter((r) => r.path.endsWith('/images/edits')).slice(-2) as Loose[];
      expect(sent.map((r) => r.multipart.files[0].size)).toEqual([png(256, 256).length, png(256, 256).length]);
      expect(await attemptsOf(response.headers.get('x-gw-request-id')!)).toEqual([[a, 'server_error'], [b, 'ok']]);
    });

    it('audio/transcriptions', async () => {
      const failing = tag();
      const { slug, a, b } = await routeOver('whisper-1', failing);
      const { data, response } = await sdk.audio.transcriptions.create({ model: slug, file: await toFile(audio(1), 'a.wav', { type: 'audio/wav' }) }).withResponse();
      expect(data as unknown as Loose).toMatchObject({ connection: b, route: 'standby_a' });
      expect(await attemptsOf(response.headers.get('x-gw-request-id')!)).toEqual([[a, 'server_error'], [b, 'ok']]);
    });

    it('audio/speech', async () => {
      const failing = tag();
      const { slug, a, b } = await routeOver('tts-1', failing);
      const { data, response } = await sdk.audio.speech.create({ model: slug, voice: 'alloy', input: 'hello' }).withResponse();
      expect((await data.arrayBuffer()).byteLength).toBeGreaterThan(0);
      expect(response.headers.get('x-gw-connection')).toBe(b);
      expect(await attemptsOf(response.headers.get('x-gw-request-id')!)).toEqual([[a, 'server_error'], [b, 'ok']]);
    });
  });

  describe('budgets', () => {
    it('refuses a request whose reservation does not fit a blocking limit, and settles one that fits', async () => {
      const limited = await f.key({ credit_limit: { amount: 0.1, period: 'monthly' } });
      const client = new OpenAI({ apiKey: limited, baseURL: `${f.api.url}/v1`, maxRetries: 0 });
      // Two HD 1792x1024 images would be held at $0.24: over the $0.10 left.
      await expect(client.images.generate({ model: 'dall-e-3', prompt: 'x', size: '1792x1024', quality: 'hd', n: 2 } as OpenAI.ImageGenerateParamsNonStreaming)).rejects.toMatchObject({ status: 402, type: 'budget_exceeded', code: 'key_budget' });
      const { response } = await client.images.generate({ model: 'dall-e-3', prompt: 'x' }).withResponse();
      const requestId = response.headers.get('x-gw-request-id')!;
      await f.settle();
      await f.api.runtime.deps.gateway.spendRows.flush();
      const rows = await f.database.db.select().from(spendLedger).where(eq(spendLedger.requestId, requestId));
      expect(rows.map((r) => Number(r.amount))).toEqual([0.04]);
    });
  });
});

describe('guardrails on image prompts and speech input', () => {
  let f: ChatFixture;
  let sdk: OpenAI;

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('openai');
    const settings = await f.client.get('/org_settings');
    expect((await f.client.patch('/org_settings', { prompt_logging_enabled: true }, settings.etag!)).status).toBe(200);
    const policy = await f.client.post('/guardrail_policies', {
      target: 'organization',
      rules: [{ detector: 'keywords', stage: 'input', action: 'block', words: ['forbidden'] }, { detector: 'email', stage: 'input', action: 'redact' }],
    });
    expect([policy.status, policy.body.error]).toEqual([201, undefined]);
    await f.settle();
    sdk = new OpenAI({ apiKey: await f.key(), baseURL: `${f.api.url}/v1`, maxRetries: 0 });
  });
  afterAll(() => f.close());

  it('blocks a prompt before anything is held or sent, and redacts what a redact rule finds in what is sent and logged', async () => {
    const before = f.sandbox.received.length;
    await expect(sdk.images.generate({ model: 'dall-e-2', prompt: 'a forbidden castle' })).rejects.toMatchObject({ status: 403, code: 'guardrail_blocked' });
    expect(f.sandbox.received.length).toBe(before);

    const { data, response } = await sdk.images.generate({ model: 'dall-e-2', prompt: 'a card for jane@example.com' }).withResponse();
    expect(data.data).toHaveLength(1);
    expect(response.headers.get('x-gw-guardrails')).toBe('redacted');
    const sent = f.sandbox.received.at(-1)! as Loose;
    expect(sent.body.prompt).not.toContain('jane@example.com');
    await f.api.runtime.deps.gateway.requestLog.flush();
    const [row] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, response.headers.get('x-gw-request-id')!));
    expect(JSON.stringify(row!.requestBody)).not.toContain('jane@example.com');
    expect(row!.guardrails).toMatchObject({ action: 'redacted' });

    const speech = await fetch(`${f.api.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${(sdk as unknown as { apiKey: string }).apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tts-1', voice: 'alloy', input: 'say forbidden words' }),
    });
    expect(speech.status).toBe(403);
    expect(await speech.json()).toMatchObject({ error: { code: 'guardrail_blocked' } });
  });
});

describe('Imagen through the Gemini API', () => {
  let f: ChatFixture;

  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('google');
  });
  afterAll(() => f.close());

  it('generates through :predict, stores and links each image, priced per image', async () => {
    const sdk = new OpenAI({ apiKey: await f.key(), baseURL: `${f.api.url}/v1`, maxRetries: 0 });
    const answer = await sdk.images.generate({ model: 'imagen-3.0-generate-002', prompt: 'a lighthouse at dusk', n: 2, size: '1792x1024' });
    const sent = f.sandbox.received.at(-1)! as Loose;
    expect(sent.path).toBe('/google/v1beta/models/imagen-3.0-generate-002:predict');
    expect(sent.body).toMatchObject({ instances: [{ prompt: 'a lighthouse at dusk' }], parameters: { sampleCount: 2, aspectRatio: '16:9' } });
    expect(answer.data).toHaveLength(2);
    // Imagen 3 lists at $0.03 an image.
    expect(answer as unknown as Loose).toMatchObject({ provider: 'google', usage: { images: 2, cost: 0.06, price_source: 'list' } });
    const file = await fetch(`${answer.data![1]!.url!}&download=1`);
    expect(file.headers.get('content-disposition')).toMatch(/^attachment; filename="req_[^"]+-2\.png"$/);
    expect(pngInfo(Buffer.from(await file.arrayBuffer()))).not.toBeNull();
  });
});

describe('stored media links expire', () => {
  let f: ChatFixture;

  // 24 hours scaled to about 4 seconds, as every durable wait is.
  beforeAll(async () => {
    f = await startChatFixture({ GW_SCHEDULE_SCALE: String(4 / 86_400) });
    await f.connect('openai');
  });
  afterAll(() => f.close());

  it('answers 404 once the link has expired', async () => {
    const sdk = new OpenAI({ apiKey: await f.key(), baseURL: `${f.api.url}/v1`, maxRetries: 0 });
    const answer = await sdk.images.generate({ model: 'dall-e-2', prompt: 'x' });
    const url = answer.data![0]!.url!;
    expect((await fetch(url)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 5_500));
    const gone = await fetch(url);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ error: { type: 'not_found' } });
  });
});
