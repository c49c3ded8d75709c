import http from 'node:http';
import { startTestApi, testDatabase, type TestApi } from '../helpers/harness';
import { bearer, createTenant, type Tenant } from '../helpers/tenants';
import type { DatabaseHandle } from '../../core/db/client';

/** Every failure answers the spec's error body with the right status, and a request id. */
describe('error rendering', () => {
  let api: TestApi;
  let database: DatabaseHandle;
  let tenant: Tenant;

  beforeAll(async () => {
    api = await startTestApi();
    database = testDatabase();
    tenant = await createTenant(database.db);
  });
  afterAll(async () => {
    await api.close();
    await database.close();
  });

  function expectErrorBody(body: unknown, type: string, code: string | null) {
    expect(body).toEqual({ error: { message: expect.any(String), type, code } });
  }

  it('answers an unknown route with 404 not_found and a request id', async () => {
    const res = await fetch(`${api.url}/v2/nothing-here`);
    expect(res.status).toBe(404);
    expect(res.headers.get('x-gw-request-id')).toMatch(/^req_/);
    expectErrorBody(await res.json(), 'not_found', null);
  });

  it('answers an unknown /v1 route with 404 even with a valid key', async () => {
    const res = await fetch(`${api.url}/v1/nothing-here`, { headers: bearer(tenant.key.secret) });
    expect(res.status).toBe(404);
    expectErrorBody(await res.json(), 'not_found', null);
  });

  it('answers malformed JSON with 400 invalid_request_error', async () => {
    const res = await fetch(`${api.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(tenant.key.secret), 'content-type': 'application/json' },
      body: '{"model": "x", "messages": [',
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { type: string } };
    expect(body.error.type).toBe('invalid_request_error');
    expect(res.headers.get('x-gw-request-id')).toMatch(/^req_/);
  });

  it('refuses a 30 MB chat body from its Content-Length before reading it', async () => {
    // Only the headers are sent: an answer proves the gateway decided without the body.
    const { status, body, headers } = await new Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }>(
      (resolve, reject) => {
        const req = http.request(`${api.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': String(30 * 1024 * 1024) },
        });
        req.on('response', (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => {
            resolve({ status: res.statusCode!, body: text, headers: res.headers });
            req.destroy();
          });
        });
        req.on('error', reject);
        req.flushHeaders();
      },
    );
    expect(status).toBe(413);
    expectErrorBody(JSON.parse(body), 'request_too_large', null);
    expect(headers['x-gw-request-id']).toMatch(/^req_/);
    expect(headers.connection).toBe('close');
  });

  it('stops reading a chunked body (no Content-Length) at the endpoint limit', async () => {
    const chunk = Buffer.alloc(1024 * 1024, ' ');
    let sent = 0;
    // The gateway stops taking the body at the limit (28 MB): the rest is read and discarded,
    // never held, and the 413 follows the end of the body (within the lingering bounds), so the
    // client is never cut while writing and never answered while it still uploads.
    const outcome = await new Promise<{ status: number; body: string } | { cut: string }>((resolve) => {
      const req = http.request(`${api.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...bearer(tenant.key.secret), 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      });
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (!answered) resolve({ cut: err.code ?? err.message });
      });
      const pump = () => {
        while (!answered && sent < 40) {
          sent++;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        if (!answered) req.end();
      };
      pump();
    });
    expect(outcome).toMatchObject({ status: 413 });
    expect(JSON.parse((outcome as { body: string }).body).error.type).toBe('request_too_large');
    expect(sent).toBe(40);
  });

  it('refuses an Expect: 100-continue upload over the limit without asking for the body', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${api.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...bearer(tenant.key.secret), 'content-type': 'application/json', 'content-length': String(29_000_000), expect: '100-continue' },
      });
      req.on('continue', () => reject(new Error('the gateway asked for an oversized body')));
      req.on('response', (res) => {
        resolve(res.statusCode!);
        req.destroy();
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(status).toBe(413);
  });
});

describe('unexpected failures', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi({
      deps: (deps) => ({
        ...deps,
        keys: {
          resolve: async () => {
            throw new Error('connection terminated unexpectedly at pg/lib/client.js:132');
          },
          clear: () => undefined,
          clearOrg: () => undefined,
        },
      }),
    });
  });
  afterAll(() => api.close());

  it('answers 500 internal_error with no stack trace or internal detail', async () => {
    const res = await fetch(`${api.url}/v1/models`, { headers: bearer('gwk_anything') });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: { message: expect.any(String), type: 'internal_error', code: null } });
    expect(text).not.toMatch(/pg\/lib|at |connection terminated/);
    expect(res.headers.get('x-gw-request-id')).toMatch(/^req_/);
  });
});
