import http from 'node:http';
import { wav, speechSamples } from '../../sandbox/files';
import { startSandbox, type Sandbox } from '../../sandbox/server';
import { until } from '../helpers/until';

type Loose = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The sandbox's bill (issue 54, section 1): what each provider would charge for each call it
 * accepted, at its published list prices, per credential and request id, on a sandbox-only
 * path. The expected figures are worked by hand from the vendors' price pages (per million
 * tokens unless said), so a pricing slip in the bill fails here:
 *   gpt-4o-mini 0.15 in, 0.075 cached, 0.60 out; o3-mini 1.10 in, 4.40 out;
 *   claude-3-5-haiku 0.80 in, 1.00 5-minute write, 1.60 1-hour write, 0.08 read, 4.00 out, $10 per 1,000 searches;
 *   gemini-2.0-flash 0.10 in, 0.40 out; text-embedding-3-small 0.02;
 *   dall-e-3 1024x1024 standard $0.04 an image; tts-1 $15 per million characters; whisper-1 $0.006 a minute;
 *   sora-2 $0.10 a second.
 */
describe('sandbox bill: what each provider would charge', () => {
  let sandbox: Sandbox;
  let seq = 0;
  const M = 1e6;

  beforeAll(async () => {
    sandbox = await startSandbox();
  });
  afterAll(() => sandbox.close());

  /** A fresh credential: its bill holds only this test's calls. */
  const credential = () => `sk-sandbox-bill-${++seq}`;
  const post = (path: string, secret: string, body: unknown, headers: Record<string, string> = {}) => fetch(`${sandbox.url}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}`, 'x-api-key': secret, 'x-goog-api-key': secret, ...headers }, body: JSON.stringify(body),
  });
  const billOf = async (secret: string, requestId?: string): Promise<Loose> => {
    const res = await fetch(`${sandbox.url}/_sandbox/bill${requestId ? `?request_id=${requestId}` : ''}`, { headers: { authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(200);
    return res.json() as Promise<Loose>;
  };

  it('bills a whole chat answer at list price, under the request id the caller sent', async () => {
    const key = credential();
    // 4 prompt words, 5 answer words ("Hello from the sandbox model gpt-4o-mini." is 6 words).
    const res = await post('/openai/v1/chat/completions', key, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'one two three four' }] }, { 'x-client-request-id': 'req_a' });
    const answer = (await res.json()) as Loose;
    expect(answer.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 6 });
    const bill = await billOf(key, 'req_a');
    expect(bill.lines).toHaveLength(1);
    expect(bill.lines[0]).toMatchObject({ requestId: 'req_a', provider: 'openai', model: 'gpt-4o-mini', units: { input_tokens: 4, output_tokens: 6 } });
    expect(bill.total_usd).toBeCloseTo((4 * 0.15 + 6 * 0.6) / M, 12);
    expect((await billOf(key, 'req_other')).lines).toHaveLength(0);
    // The credential is kept as a hash, never as sent.
    expect(JSON.stringify(bill)).not.toContain(key);
  });

  it('bills the whole answer of a stream its client left after the first chunk, reasoning included', async () => {
    const key = credential();
    const res = await post('/openai/v1/chat/completions', key, { model: 'o3-mini', stream: true, messages: [{ role: 'user', content: 'go [sandbox words=400 reasoning=2000]' }] }, {});
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    await until(async () => sandbox.abandonedStreams() > 0, 'the stream abandoned');
    const bill = await billOf(key);
    expect(bill.lines[0].units).toMatchObject({ output_tokens: 400, reasoning_tokens: 2000 });
    // 4 prompt words ("go" and the directive's three) at 1.10, 400 completion tokens at 4.40.
    expect(bill.total_usd).toBeCloseTo((4 * 1.1 + 400 * 4.4) / M, 12);
  });

  it('bills Anthropic cache writes by their TTL, cache reads, thinking and web searches', async () => {
    const key = credential();
    // 16 prompt words (the directive's six included): 2 read from the cache, 3 written for 5 minutes, 4 for an hour, 7 plain.
    const text = 'a b c d e f g h i j [sandbox cached=2 cache_write=3 cache_write_1h=4 web_searches=3 reasoning=100]';
    const res = await post('/anthropic/v1/messages', key, { model: 'claude-3-5-haiku-latest', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2048 }, messages: [{ role: 'user', content: text }] }, { 'anthropic-version': '2023-06-01' });
    const answer = (await res.json()) as Loose;
    const thinking = 'The user wants an answer; the sandbox gives its usual one.'.split(' ').length + 100;
    const words = 'Hello from the sandbox model claude-3-5-haiku-latest.'.split(' ').length;
    expect(answer.usage).toMatchObject({ input_tokens: 7, cache_read_input_tokens: 2, cache_creation_input_tokens: 7, output_tokens: words + thinking, server_tool_use: { web_search_requests: 3 } });
    const bill = await billOf(key);
    expect(bill.lines[0].units).toMatchObject({ input_tokens: 16, cache_read_tokens: 2, cache_write_tokens: 7, cache_write_1h_tokens: 4, reasoning_tokens: thinking, web_searches: 3 });
    expect(bill.total_usd).toBeCloseTo((7 * 0.8 + 2 * 0.08 + 3 * 1.0 + 4 * 1.6 + (words + thinking) * 4) / M + 3 * 0.01, 12);
  });

  it('bills OpenAI\'s priority tier at twice and flex at half the standard rates', async () => {
    const key = credential();
    const ask = (tier: string, id: string) => post('/openai/v1/responses', key, { model: 'gpt-4o-mini', input: 'one two', service_tier: tier }, { 'x-client-request-id': id });
    await (await ask('priority', 'p')).json();
    await (await ask('flex', 'f')).json();
    await (await ask('default', 'd')).json();
    const standard = (await billOf(key, 'd')).total_usd;
    expect(standard).toBeCloseTo((2 * 0.15 + 6 * 0.6) / M, 12);
    expect((await billOf(key, 'p')).total_usd).toBeCloseTo(standard * 2, 12);
    expect((await billOf(key, 'f')).total_usd).toBeCloseTo(standard / 2, 12);
    expect((await billOf(key, 'p')).lines[0].tier).toBe('priority');
  });

  it('bills Gemini thoughts as output', async () => {
    const key = credential();
    await post('/google/v1beta/models/gemini-2.0-flash:generateContent', key, { contents: [{ role: 'user', parts: [{ text: 'hi [sandbox words=50 reasoning=20]' }] }] });
    const bill = await billOf(key);
    expect(bill.lines[0].units).toMatchObject({ input_tokens: 4, output_tokens: 50, reasoning_tokens: 20 });
    expect(bill.total_usd).toBeCloseTo((4 * 0.1 + 50 * 0.4) / M, 12);
  });

  it('bills a call whose client hung up while the model worked, and none the provider refused', async () => {
    const hungUp = credential();
    // A raw request hung up 50 ms into a 300 ms answer.
    await new Promise<void>((resolve) => {
      const req = http.request(`${sandbox.url}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${hungUp}` } });
      req.on('error', () => resolve());
      req.end(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'slow [sandbox delay_ms=300]' }] }));
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 50);
    });
    await until(async () => (await billOf(hungUp)).lines.length === 1, 'the hung-up call billed');
    const refused = credential();
    expect((await post('/openai/v1/chat/completions', refused, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x [sandbox status=429]' }] })).status).toBe(429);
    expect((await post('/openai/v1/chat/completions', refused, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x [sandbox moderation]' }] })).status).toBe(400);
    expect((await billOf(refused)).lines).toHaveLength(0);
  });

  it('bills embeddings, images, speech, transcription and video renders', async () => {
    const key = credential();
    await (await post('/openai/v1/embeddings', key, { model: 'text-embedding-3-small', input: ['one two three', 'four five'] })).json();
    await (await post('/openai/v1/images/generations', key, { model: 'dall-e-3', prompt: 'a cat', size: '1024x1024' })).json();
    const speech = await post('/openai/v1/audio/speech', key, { model: 'tts-1', input: 'Hello there, sandbox.', voice: 'alloy', response_format: 'wav' });
    await speech.arrayBuffer();
    const form = new FormData();
    form.set('model', 'whisper-1');
    form.set('file', new Blob([new Uint8Array(wav(speechSamples('x'.repeat(50), 1)))], { type: 'audio/wav' }), 'a.wav');
    await (await fetch(`${sandbox.url}/openai/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form })).json();
    await (await post('/openai/v1/videos', key, { model: 'sora-2', prompt: 'a wave', seconds: '4' }, { 'idempotency-key': 'job_1-0' })).json();
    await (await post('/openai/v1/videos', key, { model: 'sora-2', prompt: 'fails [sandbox video_fail]', seconds: '8' })).json();

    const lines = (await billOf(key)).lines as Loose[];
    const usd = (model: string) => lines.filter((l) => l.model === model).map((l) => l.usd);
    expect(usd('text-embedding-3-small')[0]).toBeCloseTo((5 * 0.02) / M, 12);
    expect(usd('dall-e-3')).toEqual([0.04]);
    expect(usd('tts-1')[0]).toBeCloseTo('Hello there, sandbox.'.length * 15 / M, 12);
    // 50 characters of speech at 50 ms each: 2.5 s, billed as 3 seconds of whisper.
    expect(usd('whisper-1')[0]).toBeCloseTo(3 * 0.006 / 60, 12);
    expect(lines.filter((l) => l.model === 'sora-2').map((l) => [l.idempotencyKey, l.units.video_seconds, l.usd])).toEqual([['job_1-0', 4, 0.4], [null, 0, 0]]);
  });

  it('answers a bill only to its credential, and a call without one nothing', async () => {
    const key = credential();
    await (await post('/openai/v1/chat/completions', key, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })).json();
    expect((await billOf(key)).lines).toHaveLength(1);
    expect((await billOf(credential())).lines).toHaveLength(0);
    expect((await fetch(`${sandbox.url}/_sandbox/bill`)).status).toBe(401);
  });
});
