import Router from '@koa/router';
import type { AuthFailureLimiter } from '../../core/auth/auth-failure-limiter';
import type { KeyResolver } from '../../core/auth/gateway-key-auth';
import type { Clock } from '../../core/clock';
import { GatewayError } from '../../core/errors';
import type { GatewayState } from '../context';
import { parseInput } from '../validation';
import { chatRequestSchema } from './chat-request';
import { jsonBody } from '../middleware/body';
import { gatewayAuth } from '../middleware/gateway-auth';

export type GatewayRouterDeps = { keys: KeyResolver; authFailures: AuthFailureLimiter; clock: Clock };

/** `/v1`: key auth first (DESIGN 3, step 2), then the body, then the endpoint. */
export function gatewayRouter(deps: GatewayRouterDeps): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: '/v1' });
  router.use(gatewayAuth(deps), jsonBody());

  // Models come from the key's provider connections; none can be connected yet, so the
  // honest list is empty until provider connections exist.
  router.get('/models', (ctx) => {
    ctx.body = { object: 'list', data: [] };
  });

  // The request is validated in full; provider connections do not exist yet, so no connection
  // can serve any model (spec 7: 503 no_provider_connected).
  router.post('/chat/completions', (ctx) => {
    const request = parseInput(chatRequestSchema, ctx.state.body);
    throw new GatewayError('no_provider_connected', `No provider connection serves \`${request.model}\`.`);
  });

  return router;
}
