import type { Middleware } from 'koa';
import { newId } from '../../core/ids';
import type { Logger } from '../../core/logger';
import type { GatewayState } from '../context';

export const REQUEST_ID_HEADER = 'X-GW-Request-Id';

/** Gives every request an id (header on every response, body id of a chat answer) and a logger carrying it. */
export function requestContext(logger: Logger): Middleware<GatewayState> {
  return async (ctx, next) => {
    const requestId = newId('req');
    ctx.state.requestId = requestId;
    const fields: Record<string, string> = { request_id: requestId };
    ctx.state.logFields = fields;
    // A child logger costs an allocation and a serialization of its fields: made only if used.
    let log: Logger | null = null;
    Object.defineProperty(ctx.state, 'log', {
      get: () => (log ??= logger.child(fields)),
      set: (value: Logger) => void (log = value),
      enumerable: true,
      configurable: true,
    });
    ctx.set(REQUEST_ID_HEADER, requestId);
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      // The access line carries the same fields without a child logger of its own.
      // Spread last: an object that begins with a spread gains properties slowly (docs/decisions.md).
      logger.info(
        { method: ctx.method, path: ctx.path, status: ctx.status, ms: Number(process.hrtime.bigint() - started) / 1e6, ...fields },
        'request',
      );
    }
  };
}
