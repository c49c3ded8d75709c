import type { Middleware } from 'koa';
import { GatewayError, isGatewayError } from '../../core/errors';
import { errorSummary } from '../../core/logger';
import { dependencyUnavailable, transientDependency } from '../../core/transient';
import type { GatewayState } from '../context';
import { awaitingContinue, lingerAfterRefusal } from './body';
import { anthropicErrorBody, isMessagesPath } from '../gateway/protocols/anthropic-messages';

type HttpishError = Error & { status?: number; statusCode?: number; expose?: boolean; type?: string };

/** Errors raised by Koa and its helpers (http-errors) mapped onto the catalog. */
function fromHttpError(err: HttpishError): GatewayError | null {
  const status = err.status ?? err.statusCode;
  if (err.type === 'entity.too.large' || status === 413) {
    return new GatewayError('request_too_large', 'Request body is larger than this endpoint accepts.');
  }
  if (status === 404) return new GatewayError('not_found', 'Not found.');
  if (status !== undefined && status >= 400 && status < 500) {
    return new GatewayError('invalid_request', err.expose ? err.message : 'Invalid request.');
  }
  return null;
}

/**
 * The one place an error body is written. One of our own services (Temporal, Postgres, Redis)
 * being unavailable is answered 503 without a code and with Retry-After: transient, retry.
 * Anything else that is not a GatewayError is a defect: logged with its stack, answered as 500
 * internal_error without one. Logs keep an error's type, message and code, never the whole
 * object (an HTTP client's error carries the request's options and headers).
 */
export function errorHandler(): Middleware<GatewayState> {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new GatewayError('not_found', `No route for ${ctx.method} ${ctx.path}.`);
      }
    } catch (raw) {
      let err = isGatewayError(raw) ? raw : fromHttpError(raw as HttpishError);
      const dependency = err ? null : transientDependency(raw);
      if (dependency) {
        ctx.state.log?.warn({ dependency, err: errorSummary(raw) }, 'dependency unavailable');
        err = dependencyUnavailable();
      }
      if (!err) {
        ctx.state.log?.error({ err: errorSummary(raw) }, 'unhandled error');
        err = new GatewayError('internal_error', 'The gateway hit an internal error. The request id identifies it in our logs.');
      }
      ctx.status = err.status;
      for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
      // A body we refused to read (any refusal before or while reading it: 401, 413, 429,
      // a file over its limit, ...) is not kept on a kept-alive connection; it is read and
      // discarded, within bounds, before the answer goes out, so the client reads the answer
      // instead of a reset or a stall (lingering close; see lingerAfterRefusal).
      if (!ctx.req.complete && ctx.req.readable) {
        ctx.set('Connection', 'close');
        const lingering = lingerAfterRefusal(ctx.req);
        if (!awaitingContinue(ctx.req, ctx.res as { _sent100?: boolean })) await lingering;
      }
      // Each client protocol gets errors in its own shape, the gateway's code kept in them.
      ctx.body = isMessagesPath(ctx.path) ? anthropicErrorBody(err) : err.toBody();
    }
  };
}
