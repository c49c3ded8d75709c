import http from 'node:http';
import { sseData, startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

const WORDS = 1_500;
const WORD_BYTES = 65_536;
// The sandbox's frames for one answer: the role, one per word, the finish reason, the usage
// (the gateway always asks for it upstream), [DONE].
const FRAMES = WORDS + 4;

/** Resolves once `read()` has given the same value for `quietPolls` polls in a row (or `deadlineMs` passed). */
async function settledValue(read: () => number, quietPolls = 10, intervalMs = 100, deadlineMs = 60_000): Promise<number> {
  const deadline = Date.now() + deadlineMs;
  let last = read();
  let quiet = 0;
  while (quiet < quietPolls && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, intervalMs));
    const now = read();
    quiet = now === last ? quiet + 1 : 0;
    last = now;
  }
  return last;
}

/**
 * Streams honour backpressure end to end: a client that stops reading stops the gateway
 * reading from the provider (whose own writes then wait for `drain`), instead of the gateway
 * buffering the rest of the answer; once the client reads again every chunk arrives, in order.
 */
describe('chat streams under a slow client', () => {
  let f: ChatFixture;
  let secret: string;

  beforeAll(async () => {
    f = await startChatFixture();
    secret = await f.key();
    // About 98 MB of answer: far more than the socket buffers between provider and client hold.
    await f.connect('openai', { directives: `words=${WORDS},word_bytes=${WORD_BYTES}` });
  });
  afterAll(() => f.close());

  it('reads the provider no faster than the client reads, then delivers every chunk in order', async () => {
    const before = f.sandbox.framesSent();
    const payload = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say a lot' }], stream: true });
    const req = http.request(`${f.api.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)), 'x-forwarded-for': '10.7.7.7' },
    });
    const response = new Promise<http.IncomingMessage>((resolve, reject) => {
      req.on('response', resolve);
      req.on('error', reject);
    });
    req.end(payload);
    // The answer has begun; this client reads nothing of it for now.
    const res = await response;
    expect(res.statusCode).toBe(200);

    const stalled = (await settledValue(() => f.sandbox.framesSent())) - before;
    // The provider is held back well before the end of its answer.
    expect(stalled).toBeLessThan(FRAMES / 2);

    const text = await new Promise<string>((resolve, reject) => {
      const parts: string[] = [];
      res.setEncoding('utf8');
      res.on('data', (c: string) => parts.push(c));
      res.on('end', () => resolve(parts.join('')));
      res.on('error', reject);
    });
    expect(f.sandbox.framesSent() - before).toBe(FRAMES);
    const events = sseData(text);
    expect(events.at(-1)).toBe('[DONE]');
    const contents = (events.slice(0, -1) as Loose[]).map((e) => e.choices[0]?.delta?.content as string | undefined).filter((c): c is string => Boolean(c));
    expect(contents).toHaveLength(WORDS);
    contents.forEach((c, i) => {
      expect(c.startsWith(`w${String(i).padStart(7, '0')}x`)).toBe(true);
      expect(c.trimEnd()).toHaveLength(WORD_BYTES - 1);
    });
    expect((events.at(-2) as Loose).choices[0].finish_reason).toBe('stop');
  });

  it('cannot reject unhandled after the stream ended: a failure there is caught and logged', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    const requestLog = f.api.runtime.deps.gateway.requestLog;
    const record = requestLog.record;
    requestLog.record = () => {
      throw new Error('request log unavailable');
    };
    try {
      const res = await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello [sandbox reply=Hi%20there]' }], stream: true });
      expect(res.status).toBe(200);
      expect(sseData(res.text).at(-1)).toBe('[DONE]');
      await f.settle();
    } finally {
      requestLog.record = record;
      process.off('unhandledRejection', onRejection);
    }
    expect(rejections).toEqual([]);
  });
});
