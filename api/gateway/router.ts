import Router from '@koa/router';
import type { AuthFailureLimiter } from '../../core/auth/auth-failure-limiter';
import type { KeyResolver } from '../../core/auth/gateway-key-auth';
import type { Clock } from '../../core/clock';
import type { RedisHandle } from '../../core/redis';
import { toDollars, toNanos } from '../../core/spend/money';
import { spendScopes } from '../../core/spend/scopes';
import { callableModels } from '../../core/routing/callable-models';
import type { GatewayContext, GatewayState } from '../context';
import { GatewayError } from '../../core/errors';
import type { Middleware } from 'koa';
import { jsonBody } from '../middleware/body';
import { unlessMultipartRoute } from '../middleware/multipart';
import { gatewayAuth } from '../middleware/gateway-auth';
import { keyRateLimit, meterKnownKey, type KeyMeterDeps } from '../middleware/key-rate-limit';
import { chatCompletions } from './chat';
import { messagesRoutes } from './messages';
import { responsesRoutes } from './responses';
import { embeddingsRoutes } from './embeddings';
import { decisionRoutes } from './decisions';
import { mediaRoutes } from './media-routes';
import { jobRoutes } from './jobs';
import { fileRoutes } from './files';
import { batchRoutes } from './batches';
import { messageBatchRoutes } from './message-batches';
import { requestLogRoutes } from './requests';
import { usageRoutes } from './usage';
import { mcpRoutes } from './mcp';
import type { Database } from '../../core/db/client';
import type { GatewayServices } from './services';

/** The routes that run the chat call (api/gateway/chat-call.ts). */
const CHAT_CALL_PATHS: ReadonlySet<string> = new Set(['/v1/chat/completions', '/v1/messages', '/v1/responses']);

export type GatewayRouterDeps = { keys: KeyResolver; authFailures: AuthFailureLimiter; clock: Clock; redis: RedisHandle; spendRedis: RedisHandle; db: Database; gateway: GatewayServices };

/** `/v1`: key auth first (DESIGN 3, step 2), the key's rate tier, then the body, then the endpoint. */
export function gatewayRouter(deps: GatewayRouterDeps): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: '/v1' });
  // The chat call's routes count the key's request in the same Redis step as their spend reservation.
  const countsItself = (ctx: GatewayContext) => ctx.method === 'POST' && CHAT_CALL_PATHS.has(ctx.path.toLowerCase().replace(/\/+$/, ''));
  // A route that takes multipart (multipartBody) streams its own body; JSON is parsed for the rest.
  router.use(gatewayAuth({ ...deps, redis: deps.spendRedis }), keyRateLimit(deps.spendRedis, { countsItself }), unlessMultipartRoute(jsonBody()));

  router.get('/models', async (ctx) => {
    const key = ctx.state.key!;
    const config = await deps.gateway.orgConfig.get(key.orgId);
    ctx.body = {
      object: 'list',
      data: callableModels(key, config, deps.gateway.catalog).map((m) => ({ id: m.id, object: 'model', created: 0, owned_by: m.owned_by, type: m.type })),
    };
  });

  /**
   * `GET /v1/key` (spec 2.5): the key lineage's limit and its settled spend in the current
   * window (lifetime for `never` and without a limit), from the same counters the reservation
   * checks.
   */
  router.get('/key', async (ctx) => {
    const key = ctx.state.key!;
    const config = await deps.gateway.orgConfig.get(key.orgId);
    const scope = spendScopes(key, config, [], deps.clock.now())[0]!;
    const [usage] = await deps.gateway.spend.spent([scope]);
    const limit = key.creditLimit?.amount ?? null;
    ctx.body = {
      label: key.label,
      limit,
      usage: usage!,
      limit_remaining: limit === null ? null : Math.max(0, toDollars(toNanos(limit) - toNanos(usage!))),
      limit_period: key.creditLimit?.period ?? null,
      limit_resets_at: key.creditLimit ? scope.resetsAt?.toISOString() ?? null : null,
    };
  });

  router.post('/chat/completions', chatCompletions(deps.gateway));
  messagesRoutes(router, deps.gateway);
  responsesRoutes(router, { db: deps.db, clock: deps.clock, gateway: deps.gateway });
  embeddingsRoutes(router, deps.gateway);
  mediaRoutes(router, deps.gateway);
  jobRoutes(router, { db: deps.db, clock: deps.clock, gateway: deps.gateway, jobs: deps.gateway.jobs });
  fileRoutes(router, { db: deps.db, clock: deps.clock, gateway: deps.gateway });
  batchRoutes(router, { db: deps.db, clock: deps.clock, jobs: deps.gateway.jobs });
  messageBatchRoutes(router, { db: deps.db, clock: deps.clock, gateway: deps.gateway });
  requestLogRoutes(router, { db: deps.db, clock: deps.clock });
  usageRoutes(router, { db: deps.db, clock: deps.clock });
  mcpRoutes(router, { db: deps.db, gateway: deps.gateway });
  decisionRoutes(router, { db: deps.db, gateway: deps.gateway });

  return router;
}

/** Whether a path is one of the gateway's (`/v1` and below). */
export function isGatewayPath(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/');
}

/**
 * Rate headers for answers decided before a `/v1` route authenticates (spec 8 "on every
 * response"): a 413 from Content-Length. Non-gateway paths are left alone.
 */
export function gatewayPreAuthMeter(deps: KeyMeterDeps): (ctx: GatewayContext) => Promise<void> {
  return async (ctx) => {
    if (isGatewayPath(ctx.path)) await meterKnownKey(ctx, deps);
  };
}

/**
 * Mounted after every router: a `/v1` path no route matched answers 404 `not_found`, with the
 * rate headers of a key the request carries. The answer stays 404 with or without a key.
 */
export function gatewayNotFound(deps: KeyMeterDeps): Middleware<GatewayState> {
  return async (ctx, next) => {
    if (!isGatewayPath(ctx.path)) return next();
    await meterKnownKey(ctx, deps);
    throw new GatewayError('not_found', `No route for ${ctx.method} ${ctx.path}.`);
  };
}
