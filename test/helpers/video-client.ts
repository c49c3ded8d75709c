import type { ChatFixture, Loose } from './chat-fixture';
import { randomClientAddress } from './harness';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export type VideoClient = ReturnType<typeof videoClient>;

/**
 * The gateway's job endpoints as a test calls them, with a key of the fixture's tenant. The
 * fixture and key are read when a call is made (test files set them up in beforeAll).
 */
export function videoClient(fixture: () => ChatFixture, defaultKey: () => string) {
  async function call(method: string, p: string, body?: unknown, headers: Record<string, string> = {}, key = defaultKey()) {
    const res = await fetch(`${fixture().api.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress(), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: (text ? JSON.parse(text) : {}) as Loose, headers: res.headers };
  }
  const submit = (body: Record<string, unknown>, headers: Record<string, string> = {}, key = defaultKey()) =>
    call('POST', '/v1/videos', { model: 'openai/sora-2', duration_seconds: 4, ...body }, headers, key);
  const read = (id: string, key = defaultKey()) => call('GET', `/v1/jobs/${id}`, undefined, {}, key);
  /** Polls the job until `done` says so. */
  async function until(id: string, done: (job: Loose) => boolean, timeoutMs = 20_000, key = defaultKey()): Promise<Loose> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = (await read(id, key)).json;
      if (done(job)) return job;
      if (Date.now() > deadline) throw new Error(`job ${id} stuck: ${JSON.stringify(job)}`);
      await sleep(40);
    }
  }
  const terminal = (j: Loose) => ['succeeded', 'failed', 'canceled'].includes(j.status);
  return { call, submit, read, until, terminal };
}
