import { SpanStatusCode } from '@opentelemetry/api';
import { genAiOperationOf } from '../../core/observability/attempt-spans';
import { newTraceId, RecordedSpan, SPAN_KIND } from '../../core/observability/span-recorder';
import { parseTraceparent, processTracingSetup, RequestTrace, traceIdOfTraceparent } from '../../core/observability/tracing';
import type { GatewayContext } from '../context';
import { routeTemplateOf } from './route-template';

export const TRACE_ID_HEADER = 'X-GW-Trace-Id';

/** Only the gateway's model endpoints are traced: health probes and console assets would drown them. */
const TRACED = '/v1/';
/** An unsampled server span's attributes: none are kept. */
const NO_ATTRIBUTES = Object.freeze({});

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
      // Unsampled, the server span is only its ids (a workflow started in the request joins it, unsampled).
      const span = recorder
        ? new RecordedSpan(recorder, traceId, caller?.spanId, `${ctx.method} ${ctx.path}`, SPAN_KIND.server, {
          'http.request.method': ctx.method,
          'url.path': ctx.path,
          'url.scheme': ctx.protocol,
          'gw.request_id': ctx.state.requestId,
        })
        : new RecordedSpan(null, traceId, caller?.spanId, '', SPAN_KIND.server, NO_ATTRIBUTES);
      const requestTrace = new RequestTrace(span, genAiOperationOf(ctx.path), recorder);
      ctx.state.traceId = traceId;
      ctx.state.trace = requestTrace;
      ctx.set(TRACE_ID_HEADER, traceId);
      return requestTrace;
    },
    end(ctx, requestTrace) {
      if (!requestTrace.recording) return;
      const span = requestTrace.server;
      // The matched route's template: `POST /v1/videos/:id`, not every id.
      const route = routeTemplateOf(ctx);
      if (route !== undefined) {
        span.setAttribute('http.route', route);
        span.updateName(`${ctx.method} ${route}`);
      }
      span.setAttribute('http.response.status_code', ctx.status);
      if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      requestTrace.endAll();
      span.end();
    },
  };
}
