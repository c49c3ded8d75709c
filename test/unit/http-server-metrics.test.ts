import http from 'node:http';
import { PassThrough } from 'node:stream';
import Router from '@koa/router';
import Koa from 'koa';
import type { GatewayState } from '../../api/context';
import { listen } from '../../api/listen';
import { requestContext } from '../../api/middleware/request-context';
import { createLogger } from '../../core/logger';
import { createGatewayMetrics, HTTP_SERVER_DURATION_BUCKETS, type GatewayMetrics } from '../../core/observability/metrics';
import { until } from '../helpers/until';

/**
 * `http_server_request_duration_seconds` (issue 53): the OpenTelemetry HTTP server convention's
 * duration as Prometheus names it, observed by the request context for every request of a real
 * Koa server on a real socket, when its response ends.
 */

type Series = { method: string; route: string; status: string; count: number };

/** The metric's `_count` series, from the registry's own text. */
async function seriesOf(metrics: GatewayMetrics): Promise<Series[]> {
  const text = await metrics.registry.getSingleMetricAsString('http_server_request_duration_seconds');
  const out: Series[] = [];
  for (const [, labels, value] of text.matchAll(/^http_server_request_duration_seconds_count\{(.*)\} (\S+)$/gm)) {
    const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(labels!)?.[1] ?? '?';
    out.push({ method: label('http_request_method'), route: label('http_route'), status: label('http_response_status_code'), count: Number(value) });
  }
  return out;
}

describe('HTTP server request duration (OpenTelemetry HTTP conventions)', () => {
  let metrics: GatewayMetrics;
  let server: Awaited<ReturnType<typeof listen>>;
  let url: string;
  /** The stream the held route answers with, ended by the test. */
  let held: PassThrough | null = null;
  /** The waiting route's request arrived, and what lets it answer. */
  let arrived = false;
  let answer: () => void = () => {};

  beforeAll(async () => {
    metrics = createGatewayMetrics('gw-test', (_kind, model) => model);
    const app = new Koa<GatewayState>();
    app.silent = true;
    app.use(requestContext(createLogger('silent'), { http: (...args) => metrics.observeHttpRequest(...args) }));
    const router = new Router<GatewayState>({ prefix: '/v1' });
    // Router-level middleware that refuses some requests before their route runs (as the gateway's key check does).
    router.use((ctx, next) => (ctx.get('x-deny') ? ctx.throw(401) : next()));
    router.get('/items/:id', (ctx) => void (ctx.body = { id: ctx.params.id }));
    router.post('/items', (ctx) => void (ctx.status = 201));
    router.get('/held', (ctx) => {
      held = new PassThrough();
      ctx.type = 'text/event-stream';
      ctx.body = held;
      held.write('data: first\n\n');
    });
    router.get('/waiting', async (ctx) => {
      arrived = true;
      await new Promise<void>((resolve) => (answer = resolve));
      ctx.body = 'late';
    });
    router.get('/broken', () => {
      throw new Error('boom');
    });
    app.use(router.routes());
    server = await listen(app, 0, '127.0.0.1');
    url = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.close();
  });

  it('labels each request with its method, route template and status: never its path', async () => {
    for (const id of ['a1', 'b2', 'c3']) expect((await fetch(`${url}/v1/items/${id}`)).status).toBe(200);
    expect((await fetch(`${url}/v1/items`, { method: 'POST' })).status).toBe(201);
    expect((await fetch(`${url}/v1/broken`)).status).toBe(500);
    // Refused before its route ran: still that route's template.
    expect((await fetch(`${url}/v1/items/d4`, { headers: { 'x-deny': '1' } })).status).toBe(401);
    // No route took these: no route label, whatever the path.
    expect((await fetch(`${url}/nowhere/${Date.now()}`)).status).toBe(404);
    // A method the conventions do not name is `_OTHER`.
    expect((await fetch(`${url}/v1/items/a1`, { method: 'PROPFIND' })).status).toBe(404);
    const series = await until(async () => {
      const s = await seriesOf(metrics);
      return s.reduce((n, x) => n + x.count, 0) >= 8 ? s : null;
    }, 'eight requests observed', 10_000, 20);
    expect(series).toEqual(expect.arrayContaining([
      { method: 'GET', route: '/v1/items/:id', status: '200', count: 3 },
      { method: 'POST', route: '/v1/items', status: '201', count: 1 },
      { method: 'GET', route: '/v1/broken', status: '500', count: 1 },
      { method: 'GET', route: '/v1/items/:id', status: '401', count: 1 },
      { method: 'GET', route: '', status: '404', count: 1 },
      { method: '_OTHER', route: '', status: '404', count: 1 },
    ]));
    const text = await metrics.registry.getSingleMetricAsString('http_server_request_duration_seconds');
    expect(text).not.toMatch(/a1|b2|c3|d4|nowhere/);
    // The conventions' advised bounds, every one of them, then the long tail.
    const bounds = [...new Set([...text.matchAll(/le="([^"]+)"/g)].map((m) => m[1]))];
    expect(bounds).toEqual([...HTTP_SERVER_DURATION_BUCKETS.map(String), '+Inf']);
    expect(HTTP_SERVER_DURATION_BUCKETS).toEqual(expect.arrayContaining([0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]));
  });

  it('observes a streamed answer when its last byte is sent, not when the handler returns', async () => {
    const count = async () => (await seriesOf(metrics)).find((s) => s.route === '/v1/held')?.count ?? 0;
    const res = await fetch(`${url}/v1/held`);
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('first');
    // The handler returned long ago; the answer is still going.
    expect(await count()).toBe(0);
    held!.end('data: last\n\n');
    while (!(await reader.read()).done);
    expect(await until(async () => ((await count()) === 1 ? 1 : null), 'the stream observed once it ended', 10_000, 20)).toBe(1);
  });

  it('observes a request whose client left: with the status sent, or none before one was', async () => {
    const find = async (route: string, status: string) => (await seriesOf(metrics)).find((s) => s.route === route && s.status === status)?.count ?? 0;
    // Gone before the answer began: no status.
    await new Promise<void>((resolve) => {
      const req = http.get(`${url}/v1/waiting`);
      req.on('error', () => resolve());
      void until(async () => (arrived ? true : null), 'the request at its handler', 10_000, 5).then(() => req.destroy());
    });
    expect(await until(async () => ((await find('/v1/waiting', '')) === 1 ? 1 : null), 'the abandoned request observed', 10_000, 20)).toBe(1);
    answer();
    // Gone in the middle of a streamed answer: its status was sent.
    const before = await find('/v1/held', '200');
    await new Promise<void>((resolve) => {
      const req = http.get(`${url}/v1/held`, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
    });
    expect(await until(async () => ((await find('/v1/held', '200')) === before + 1 ? 1 : null), 'the abandoned stream observed', 10_000, 20)).toBe(1);
    held!.end();
  });
});
