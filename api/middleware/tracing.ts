import { SpanStatusCode } from '@opentelemetry/api';
import { genAiOperationOf } from '../../core/observability/attempt-spans';
import { newTraceId, NO_ATTRIBUTES, RecordedSpan, SPAN_KIND, type AttributeReader } from '../../core/observability/span-recorder';
import { parseTraceparent, processTracingSetup, RequestTrace, traceIdOfTraceparent } from '../../core/observability/tracing';
import type { GatewayContext } from '../context';

export const TRACE_ID_HEADER = 'X-GW-Trace-Id';

/** Only the gateway's model endpoints are traced: health probes and console assets would drown them. */
const TRACED = '/v1/';
/** What a request's server span is named and attributed from (HTTP server conventions), read when it is encoded. */
type ServerFacts = { method: string; path: string; scheme: string; requestId: string; route: string | null; status: number };

const serverAttributes: AttributeReader<ServerFacts> = (facts, out, span) => {
  span.name = `${facts.method} ${facts.route ?? facts.path}`;
  out.push('http.request.method', facts.method, 'url.path', facts.path, 'url.scheme', facts.scheme, 'gw.request_id', facts.requestId, 'http.response.status_code', facts.status);
  if (facts.route !== null) out.push('http.route', facts.route);
};

/**
 * With traces off, a gateway request that sent a `traceparent` still gets its trace id echoed and
 * logged (the caller's trace, to find the row from it); nothing else is done.
 */
export function adoptCallerTrace(ctx: GatewayContext): void {
  const header = ctx.req.headers.traceparent;
  if (header === undefined || !ctx.path.startsWith(TRACED)) return;
  const traceId = traceIdOfTraceparent(typeof header === 'string' ? header : undefined);
  if (traceId) {
    ctx.state.traceId = traceId;
    ctx.set(TRACE_ID_HEADER, traceId);
  }
}

/** What the request context does with a request's trace when traces are on. */
export type RequestTracer = {
  /** Starts a gateway request's trace (its server span); undefined for paths that are not traced. */
  begin(ctx: GatewayContext): RequestTrace | undefined;
  /** Ends it, once the answer's status is known. */
  end(ctx: GatewayContext, trace: RequestTrace): void;
};

/**
 * A server span per gateway request (HTTP server conventions: `{method} {route}`), joining the
 * caller's W3C `traceparent` when it sends one. The answer carries the trace id
 * (`X-GW-Trace-Id`), and so does the request-log row (`ctx.state.traceId`). The request's
 * steps reach the span through `ctx.state.trace`, not an async context (core/observability/tracing.ts).
 *
 * The request context middleware calls it rather than a middleware of its own: each layer of
 * Koa's chain is a promise and a bound dispatch on every request.
 *
 * Undefined when traces are off: then `requestContext` echoes and logs a caller's `traceparent`
 * (`adoptCallerTrace`).
 */
export function requestTracing(): RequestTracer | undefined {
  const tracing = processTracingSetup();
  if (!tracing) return undefined;
  return {
    begin(ctx) {
      if (!ctx.path.startsWith(TRACED)) return undefined;
      const header = ctx.req.headers.traceparent;
      const caller = parseTraceparent(typeof header === 'string' ? header : undefined);
      const traceId = caller?.traceId ?? newTraceId();
      const recorder = tracing.sampled(caller, traceId) ? tracing.recorder : null;
      // Named and attributed as it ends (`end`); unsampled, the server span is only its ids (a
      // workflow started in the request joins it, unsampled).
      const span = new RecordedSpan(recorder, traceId, caller?.spanId, '', SPAN_KIND.server, NO_ATTRIBUTES);
      const requestTrace = new RequestTrace(span, genAiOperationOf(ctx.path), recorder);
      ctx.state.traceId = traceId;
      ctx.state.trace = requestTrace;
      ctx.set(TRACE_ID_HEADER, traceId);
      return requestTrace;
    },
    end(ctx, requestTrace) {
      if (!requestTrace.recording) return;
      const span = requestTrace.server;
      // @koa/router leaves the matched route's template: `POST /v1/videos/:id`, not every id.
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      const facts: ServerFacts = {
        method: ctx.method, path: ctx.path, scheme: ctx.protocol, requestId: ctx.state.requestId, route: typeof route === 'string' ? route : null, status: ctx.status,
      };
      span.attributesFrom(facts, serverAttributes);
      if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      requestTrace.endAll();
      span.end();
    },
  };
}
