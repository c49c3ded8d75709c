import type Router from '@koa/router';
import { eq } from 'drizzle-orm';
import { keyReach } from '../../core/auth/key-reach';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { organizations } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { parseUsageParams, usageCsv, usageReport, type UsageScope } from '../../core/observability/usage';
import type { GatewayState } from '../context';

/**
 * `GET /v1/usage` (spec 4.3; issue 13): usage buckets by the key's `observability_access`:
 * `none` refuses, `scoped` counts its own key lineage, `organization` the whole organization.
 * `format=csv` answers the same figures as CSV with a header row.
 */
export function usageRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock }): void {
  router.get('/usage', async (ctx) => {
    const key = ctx.state.key!;
    if (key.observabilityAccess === 'none') {
      throw new GatewayError('permission_denied', "This key may not read usage: its `observability_access` is `none`.");
    }
    const params = parseUsageParams(ctx.query);
    // The plan is read fresh (not from the cached org config) so a plan change moves the window at once.
    const [org] = await deps.db.select({ plan: organizations.plan }).from(organizations).where(eq(organizations.id, key.orgId));
    const reach = keyReach(key);
    const scope: UsageScope = reach.lineageId === null ? { orgId: reach.orgId } : { orgId: reach.orgId, lineageId: reach.lineageId };
    const report = await usageReport(deps.db, scope, params, org?.plan ?? 'trial', deps.clock.now());
    if (params.format === 'csv') {
      ctx.type = 'text/csv; charset=utf-8';
      ctx.body = usageCsv(report);
      return;
    }
    ctx.body = report;
  });
}
