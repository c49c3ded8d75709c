import type { Middleware } from 'koa';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import type { ManagementPrincipal } from '../../core/auth/management-token-auth';
import type { SpooledMultipart } from '../../core/http/multipart';
import { newId } from '../../core/ids';
import type { Logger } from '../../core/logger';
import type { RequestTrace } from '../../core/observability/tracing';
import type { GatewayState } from '../context';
import { routeTemplateOf } from './route-template';
import { adoptCallerTrace, type RequestTracer } from './tracing';

export const REQUEST_ID_HEADER = 'X-GW-Request-Id';

/** What the HTTP server metric takes of a request as it ends (core/observability/metrics.ts `observeHttpRequest`). */
export type HttpRequestObserver = (method: string, route: string, status: number, seconds: number) => void;

/**
 * `ctx.state` of every request: one class, every field declared, so every request's state has
 * the same hidden class and the reads of it everywhere stay monomorphic. (A getter defined on
 * Koa's `{}` per request gave each request's state a map of its own, and made every
 * `ctx.state.x` on the hot path a megamorphic lookup.)
 */
class RequestState implements GatewayState {
  bodyLimit = 0;
  traceId?: string = undefined;
  trace?: RequestTrace = undefined;
  key?: KeyContext = undefined;
  principal?: ManagementPrincipal = undefined;
  body?: unknown = undefined;
  multipart?: SpooledMultipart = undefined;
  rateCounted?: boolean = undefined;
  private childLog: Logger | null = null;

  constructor(
    private readonly root: Logger,
    readonly requestId: string,
    readonly logFields: Record<string, string>,
  ) {}

  /** A child logger costs an allocation and a serialization of its fields: made only if used. */
  get log(): Logger {
    return (this.childLog ??= this.root.child(this.logFields));
  }

  set log(value: Logger) {
    this.childLog = value;
  }
}

/**
 * Gives every request an id (header on every response, body id of a chat answer) and a logger
 * carrying it. With traces on (`tracer`), a gateway request's server span starts and ends here,
 * around everything else, so it ends with the status an error was rendered as; with them off, a
 * caller's `traceparent` is adopted here. With metrics on (`http`), every request's duration is
 * observed when its response ends. Either way without a middleware of its own that every
 * request would pass through.
 */
export function requestContext(logger: Logger, options: { tracer?: RequestTracer; http?: HttpRequestObserver } = {}): Middleware<GatewayState> {
  const tracer = options.tracer;
  const http = options.http;
  return async (ctx, next) => {
    if (http) observeWhenClosed(ctx, http);
    const requestId = newId('req');
    const fields: Record<string, string> = { request_id: requestId };
    ctx.state = new RequestState(logger, requestId, fields);
    ctx.set(REQUEST_ID_HEADER, requestId);
    let trace: RequestTrace | undefined;
    if (tracer) trace = tracer.begin(ctx);
    else adoptCallerTrace(ctx);
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      if (trace) tracer!.end(ctx, trace);
      // The access line carries the same fields without a child logger of its own. Spread
      // last: an object that begins with a spread gains properties slowly (docs/decisions.md).
      logger.info(
        { method: ctx.method, path: ctx.path, status: ctx.status, ms: Number(process.hrtime.bigint() - started) / 1e6, ...fields },
        'request',
      );
    }
  };
}

/**
 * The request's duration, from here (the first thing a request passes) to the end of its response:
 * Koa writes a body after the middleware returns, and a stream's last byte goes long after, so it
 * is read when the response closes (finished, or its connection gone). The route is the template
 * the router matched (`routeTemplateOf`, as the server span's `http.route`), never the path: a
 * request no route took has none. Per request: a clock reading, and a listener on the response.
 */
function observeWhenClosed(ctx: Parameters<Middleware<GatewayState>>[0], observe: HttpRequestObserver): void {
  const started = performance.now();
  const res = ctx.res;
  res.once('close', () => {
    observe(ctx.method, routeTemplateOf(ctx) ?? '', res.headersSent ? res.statusCode : 0, (performance.now() - started) / 1000);
  });
}
