import OpenAI from 'openai';
import { startTestApi, testDatabase, type TestApi } from '../helpers/harness';
import { bearer, createTenant, type Tenant } from '../helpers/tenants';
import type { DatabaseHandle } from '../../core/db/client';
import { LINGER_MAX_BYTES } from '../../api/middleware/body';
import { socketUpload } from '../helpers/socket-upload';

/**
 * An oversized body is refused with a 413 the client can read: the gateway answers with
 * `Connection: close` and reads and discards the rest of the body (a lingering close) instead
 * of closing the socket under a client still sending it (which it would see as EPIPE).
 */
describe('413 for an oversized body, readable by ordinary clients', () => {
  let api: TestApi;
  let database: DatabaseHandle;
  let tenant: Tenant;
  // 29 MB of message text: over the chat endpoint's 28 MB limit.
  const huge = 'x'.repeat(29_000_000);

  beforeAll(async () => {
    api = await startTestApi();
    database = testDatabase();
    tenant = await createTenant(database.db);
  });
  afterAll(async () => {
    await api.close();
    await database.close();
  });

  it('answers the openai SDK with an APIError 413 request_too_large', async () => {
    const sdk = new OpenAI({ apiKey: tenant.key.secret, baseURL: `${api.url}/v1`, maxRetries: 0 });
    const error = await sdk.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: huge }] }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    const apiError = error as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(413);
    expect(apiError.error).toMatchObject({ type: 'request_too_large', code: null, message: expect.any(String) });
    expect(apiError.headers?.get('x-gw-request-id')).toMatch(/^req_/);
  });

  it('answers fetch with status 413 and a readable JSON body, then closes the connection', async () => {
    const res = await fetch(`${api.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(tenant.key.secret), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: huge }] }),
    });
    expect(res.status).toBe(413);
    expect(res.headers.get('connection')).toBe('close');
    expect(await res.json()).toEqual({ error: { message: expect.any(String), type: 'request_too_large', code: null } });
  });

  it('reads and discards the rest of a declared body while the client is still sending it', async () => {
    // The 413 is decided from the Content-Length before any byte is read; this client goes on
    // sending all 29 MB (paced, so most of it is still to come when the answer is out).
    const outcome = await socketUpload(`${api.url}/v1/chat/completions`, { ...bearer(tenant.key.secret), 'content-type': 'application/json' }, 29_000_000, { paceMs: 5 });
    expect(outcome.error).toBeNull();
    expect(outcome.sent).toBe(29_000_000);
    const [head, body] = outcome.answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    expect(head!.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(body!).error.type).toBe('request_too_large');
  });

  it('lingers the same way after any refusal made before the body is read: a 401 for a body within the limit', async () => {
    const outcome = await socketUpload(`${api.url}/v1/chat/completions`, { authorization: 'Bearer gwk_not-a-real-key', 'content-type': 'application/json' }, 20_000_000, { paceMs: 5 });
    expect(outcome.error).toBeNull();
    expect(outcome.sent).toBe(20_000_000);
    const [head, body] = outcome.answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 401 /);
    expect(head!.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(body!).error.type).toBe('authentication_error');
  });

  it('stops discarding after LINGER_MAX_BYTES more: a longer upload is cut', async () => {
    const total = 4 * LINGER_MAX_BYTES;
    const outcome = await socketUpload(`${api.url}/v1/chat/completions`, { ...bearer(tenant.key.secret), 'content-type': 'application/json' }, total, { paceMs: 0 });
    expect(outcome.error).toMatch(/EPIPE|ECONNRESET/);
    expect(outcome.sent).toBeLessThan(total);
  });

  it('answers fetch the same way for a chunked body cut at the limit while it is being read', async () => {
    const chunk = new TextEncoder().encode(' '.repeat(1_000_000));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 40) return controller.close();
        sent += 1;
        controller.enqueue(chunk);
      },
    });
    const res = await fetch(`${api.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(tenant.key.secret), 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit & { duplex: 'half' });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('request_too_large');
  });
});
