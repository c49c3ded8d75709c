import { Writable } from 'node:stream';
import Koa from 'koa';
import { request } from 'undici';
import { errorHandler } from '../../api/middleware/error-handler';
import { listen } from '../../api/listen';
import { requestContext } from '../../api/middleware/request-context';
import type { GatewayState } from '../../api/context';
import { createLogger } from '../../core/logger';
import { freePort } from '../../scripts/lib/ports';

const GATEWAY_KEY = 'gwk_0123456789abcdefghijklmnop';
const PROVIDER_SECRET = 'sk-proj-ProviderSecret0123456789';

/** The real logger writing into memory. */
function capture() {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { logger: createLogger('debug', 'test', stream), text: () => text };
}

/** An error as an HTTP client makes one: the request's options, headers included, on the object. */
function clientError(): Error {
  return Object.assign(new TypeError('fetch failed'), {
    code: 'UND_ERR_SOCKET',
    options: { method: 'POST', headers: { authorization: `Bearer ${PROVIDER_SECRET}`, 'x-api-key': PROVIDER_SECRET } },
    request: { headers: [`authorization: Bearer ${PROVIDER_SECRET}`] },
    cause: Object.assign(new Error(`certificate refused while sending Bearer ${PROVIDER_SECRET}`), { code: 'ERR_TLS_CERT_ALTNAME_INVALID', secret: PROVIDER_SECRET }),
  });
}

describe('log lines never carry a credential', () => {
  it('cuts credentials from headers and fields at any depth, and keeps idempotency keys', () => {
    const { logger, text } = capture();
    logger.info({
      req: { headers: { authorization: `Bearer ${GATEWAY_KEY}`, 'x-api-key': GATEWAY_KEY, 'api-key': GATEWAY_KEY, 'x-goog-api-key': GATEWAY_KEY, cookie: `s=${GATEWAY_KEY}`, 'proxy-authorization': `Basic ${GATEWAY_KEY}`, 'idempotency-key': 'idem-1' } },
      res: { headers: { 'set-cookie': [`s=${GATEWAY_KEY}`] } },
      connection: { config: { chatapp_url: `https://x.example/${GATEWAY_KEY}`, credential: { token: GATEWAY_KEY } }, secrets: [PROVIDER_SECRET], fallback_secrets: [PROVIDER_SECRET], sealedSecret: PROVIDER_SECRET },
      deep: { a: { b: { c: { password: PROVIDER_SECRET, secret: PROVIDER_SECRET } } } },
    }, 'request');
    const out = text();
    expect(out).not.toContain(GATEWAY_KEY);
    expect(out).not.toContain(PROVIDER_SECRET);
    const line = JSON.parse(out) as { req: { headers: Record<string, string> }; res: { headers: Record<string, string> }; connection: Record<string, unknown> };
    expect(line.req.headers).toEqual({
      authorization: '[redacted]', 'x-api-key': '[redacted]', 'api-key': '[redacted]', 'x-goog-api-key': '[redacted]',
      cookie: '[redacted]', 'proxy-authorization': '[redacted]', 'idempotency-key': 'idem-1',
    });
    expect(line.res.headers['set-cookie']).toBe('[redacted]');
    expect(line.connection).toMatchObject({ config: { chatapp_url: '[redacted]', credential: '[redacted]' }, secrets: '[redacted]', fallback_secrets: '[redacted]', sealedSecret: '[redacted]' });
  });

  it('a flat line (an access line) is written as it is only when nothing in it can be a credential', () => {
    const { logger, text } = capture();
    logger.info({ request_id: 'req_1', method: 'POST', path: '/v1/chat/completions', status: 200, ms: 1.5 }, 'request');
    logger.info({ request_id: 'req_2', token: 'plain-looking-value', password: 'hunter2' }, 'flat, sensitive names');
    logger.info({ request_id: 'req_3', note: `sent with Bearer ${PROVIDER_SECRET}`, key: GATEWAY_KEY }, 'flat, credential-shaped values');
    const lines = text().trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ request_id: 'req_1', method: 'POST', path: '/v1/chat/completions', status: 200, ms: 1.5, msg: 'request' });
    expect(lines[1]).toMatchObject({ token: '[redacted]', password: '[redacted]' });
    expect(text()).not.toContain('hunter2');
    expect(text()).not.toContain(PROVIDER_SECRET);
    expect(text()).not.toContain(GATEWAY_KEY);
  });

  it('logs an error by its type, message and code only, with credentials in its text cut', () => {
    const { logger, text } = capture();
    logger.error({ err: clientError() }, 'upstream failed');
    logger.error(clientError());
    logger.warn(`retrying with Authorization: Bearer ${PROVIDER_SECRET}`);
    const out = text();
    expect(out).not.toContain(PROVIDER_SECRET);
    const first = JSON.parse(out.split('\n')[0]!) as { err: Record<string, unknown> };
    expect(first.err).toMatchObject({ type: 'TypeError', message: 'fetch failed', code: 'UND_ERR_SOCKET', cause: { type: 'Error', code: 'ERR_TLS_CERT_ALTNAME_INVALID' } });
    expect(first.err).not.toHaveProperty('options');
    expect(first.err).not.toHaveProperty('request');
  });

  it('keeps a query error\'s statement but not its parameters', () => {
    const { logger, text } = capture();
    const err = Object.assign(new Error(`Failed query: insert into provider_connections (secret) values ($1)\nparams: ${PROVIDER_SECRET}`), {
      name: 'DrizzleQueryError',
      query: 'insert into provider_connections (secret) values ($1)',
      params: [PROVIDER_SECRET],
    });
    logger.error({ err }, 'query failed');
    expect(text()).not.toContain(PROVIDER_SECRET);
    expect(text()).toContain('insert into provider_connections');
  });

  it('the error middleware logs a failing request without its Authorization header or a provider secret', async () => {
    const { logger, text } = capture();
    const app = new Koa<GatewayState>();
    app.silent = true;
    app.use(requestContext(logger));
    app.use(errorHandler());
    app.use(async (ctx) => {
      if (ctx.path === '/real') {
        // A real undici failure: a request with a credential to a port where nothing listens.
        await request(`http://127.0.0.1:${await freePort()}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${PROVIDER_SECRET}` }, body: '{}' });
      }
      throw clientError();
    });
    const server = await listen(app, 0, '127.0.0.1');
    try {
      // A defect (500 internal_error), and a refused connection (503, transient).
      for (const [p, status] of [['/boom', 500], ['/real', 503]] as const) {
        const res = await fetch(`http://127.0.0.1:${server.port}${p}`, { headers: { authorization: `Bearer ${GATEWAY_KEY}` } });
        expect(res.status).toBe(status);
        const body = await res.text();
        expect(body).not.toContain(PROVIDER_SECRET);
      }
    } finally {
      await server.close();
    }
    const out = text();
    expect(out).toContain('"msg":"request"');
    expect(out).toContain('"msg":"unhandled error"');
    // Every line of a request, its access line included, names the request.
    const lines = out.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const line of lines) expect(line.request_id).toMatch(/^req_/);
    const ids = new Set(lines.map((l) => l.request_id));
    expect(ids.size).toBe(2);
    expect(out).toContain('"msg":"dependency unavailable"');
    expect(out).not.toContain(GATEWAY_KEY);
    expect(out).not.toContain(PROVIDER_SECRET);
  });
});
