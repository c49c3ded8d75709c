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
    ctx.state.log = logger.child({ request_id: requestId });
    ctx.set(REQUEST_ID_HEADER, requestId);
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      ctx.state.log.info(
        { method: ctx.method, path: ctx.path, status: ctx.status, ms: Number(process.hrtime.bigint() - started) / 1e6 },
        'request',
      );
    }
  };
}
