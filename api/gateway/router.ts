import Router from '@koa/router';
import type { AuthFailureLimiter } from '../../core/auth/auth-failure-limiter';
import type { KeyResolver } from '../../core/auth/gateway-key-auth';
import type { Clock } from '../../core/clock';
import type { RedisHandle } from '../../core/redis';
import { keySpend } from '../../core/budgets/key-spend';
import { callableModels } from '../../core/routing/callable-models';
import type { GatewayState } from '../context';
import { jsonBody } from '../middleware/body';
import { gatewayAuth } from '../middleware/gateway-auth';
import { keyRateLimit } from '../middleware/key-rate-limit';
import { chatCompletions } from './chat';
import { jobRoutes } from './jobs';
import type { Database } from '../../core/db/client';
import type { GatewayServices } from './services';

export type GatewayRouterDeps = { keys: KeyResolver; authFailures: AuthFailureLimiter; clock: Clock; redis: RedisHandle; db: Database; gateway: GatewayServices };

/** `/v1`: key auth first (DESIGN 3, step 2), the key's rate tier, then the body, then the endpoint. */
export function gatewayRouter(deps: GatewayRouterDeps): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: '/v1' });
  router.use(gatewayAuth(deps), keyRateLimit(deps.redis), jsonBody());

  router.get('/models', async (ctx) => {
    const key = ctx.state.key!;
    const config = await deps.gateway.orgConfig.get(key.orgId);
    ctx.body = {
      object: 'list',
      data: callableModels(key, config, deps.gateway.catalog).map((m) => ({ id: m.id, object: 'model', created: 0, owned_by: m.owned_by })),
    };
  });

  /** `GET /v1/key` (spec 2.5): the calling key's limit and what it has spent against it. */
  router.get('/key', async (ctx) => {
    const key = ctx.state.key!;
    const config = await deps.gateway.orgConfig.get(key.orgId);
    const spend = await keySpend(deps.redis, key, deps.clock.now(), config.billingDayOfMonth);
    ctx.body = {
      label: key.label,
      limit: spend.limit,
      usage: Math.round(spend.usage * 1e6) / 1e6,
      limit_remaining: spend.limit === null ? null : Math.max(0, Math.round((spend.limit - spend.usage) * 1e6) / 1e6),
      limit_period: spend.period,
      limit_resets_at: spend.resetsAt?.toISOString() ?? null,
    };
  });

  router.post('/chat/completions', chatCompletions(deps.gateway));
  jobRoutes(router, { db: deps.db, clock: deps.clock, gateway: deps.gateway, jobs: deps.gateway.jobs });

  return router;
}
