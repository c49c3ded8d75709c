import Router from '@koa/router';
import { eq } from 'drizzle-orm';
import type { AuthFailureLimiter } from '../../core/auth/auth-failure-limiter';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import type { RedisHandle } from '../../core/redis';
import { environments, organizations } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import type { GatewayState } from '../context';
import { jsonBody } from '../middleware/body';
import { authorize, managementAuth } from '../middleware/management-auth';
import { presentProviderKinds } from '../../core/providers/kinds';
import { manageUsageRoutes } from './data/usage';
import { auditEventRoutes } from './data/audit-events';
import { budgetStatusRoutes } from './data/budget-status';
import { exportRoutes } from './data/export';
import { requestDataRoutes } from './data/requests';
import { manageJobRoutes } from './data/jobs';
import { manageBatchRoutes } from './data/batches';
import { requestStatsRoutes } from './data/request-stats';
import { endUserCapOverrideRoutes } from './end-user-cap-overrides';
import { buildOpenApiDocument } from './openapi';
import { RESOURCES } from './resources';
import { resourceRouter } from './resources/router';
import type { ManagementServices } from './services';
import { webhookDeliveryRoutes } from './webhook-deliveries';
import type { SpendLedger } from '../../core/spend/ledger';

export type ManagementRouterDeps = {
  db: Database; redis: RedisHandle; spendRedis: RedisHandle; authFailures: AuthFailureLimiter; clock: Clock; manage: ManagementServices;
  /** The gateway's spend, whose settled-but-unflushed part (spend leases) budget_status includes. */
  gateway: { spend: Pick<SpendLedger, 'flush'> };
};

export function managementRouter(deps: ManagementRouterDeps): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: '/manage/v1' });
  const openApiDocument = JSON.stringify(buildOpenApiDocument(RESOURCES));

  // The document describes the API, not any organization: readable without a token, like the
  // public documentation it is.
  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = openApiDocument;
  });

  router.use(managementAuth(deps), jsonBody());

  /** Catalog data: any valid management token may read it. */
  router.get('/provider_kinds', (ctx) => {
    ctx.body = presentProviderKinds();
  });

  /** The calling token's organization: plan, entitlement and environments. */
  router.get('/organization', async (ctx) => {
    const { orgId } = authorize(ctx, 'organization:read');
    const [org] = await deps.db.select().from(organizations).where(eq(organizations.id, orgId));
    if (!org) throw new GatewayError('resource_not_found', 'Organization not found.');
    const envs = await deps.db.select({ slug: environments.slug }).from(environments).where(eq(environments.orgId, orgId));
    ctx.body = {
      id: org.id,
      object: 'organization',
      name: org.name,
      plan: org.plan,
      entitlement_state: org.entitlementState,
      environments: envs.map((e) => e.slug).sort(),
      created_at: Math.floor(org.createdAt.getTime() / 1000),
    };
  });

  webhookDeliveryRoutes(router, deps);
  endUserCapOverrideRoutes(router, deps);
  requestDataRoutes(router, deps);
  // Data operations (issue 13): not resources, so before the generic `/:type` routes.
  budgetStatusRoutes(router, { ...deps, redis: deps.spendRedis, flushSpend: (orgId) => deps.gateway.spend.flush(orgId) });
  auditEventRoutes(router, deps);
  exportRoutes(router, { db: deps.db, resources: RESOURCES.filter((r) => !r.data) });
  manageUsageRoutes(router, deps);
  manageJobRoutes(router, deps);
  manageBatchRoutes(router, deps);
  requestStatsRoutes(router, deps);

  const resources = resourceRouter(RESOURCES as never, deps);
  router.use(resources.routes());
  return router;
}
