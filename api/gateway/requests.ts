import type Router from '@koa/router';
import { eq } from 'drizzle-orm';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import { keyReach } from '../../core/auth/key-reach';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { DEFAULT_PROMPT_RETENTION_DAYS, gatewayKeys, organizations, orgSettings, type Plan } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { presentRequestLog, withBodies } from '../../core/observability/request-log-present';
import { findRequestLog, lineageKeyIds, listRequestLogs, parseRequestLogQuery, type QueryParams, type RequestLogScope } from '../../core/observability/request-log-query';
import type { GatewayState } from '../context';

type Reader = { scope: RequestLogScope; payloadAccess: boolean; retentionDays: number };

/**
 * `GET /v1/requests` and `GET /v1/requests/{id}` (spec 4.3, issue 13): a key reads request
 * history by its `observability_access`: `none` is refused, `scoped` sees its own lineage
 * (itself and the keys rotated from or into it), `organization` the whole organization. The
 * prompt and the answer come only on the single read, with `payload_access`.
 */
export function requestLogRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock }): void {
  /** Refused before anything else, the query's parameters included. */
  function checkAccess(key: KeyContext): void {
    if (key.observabilityAccess === 'none') {
      throw new GatewayError('permission_denied', 'This key may not read request history: its `observability_access` is `none`.');
    }
  }

  /** The key's payload access, the plan and the prompt retention, read fresh. */
  async function readerFor(key: KeyContext): Promise<Reader> {
    checkAccess(key);
    const [found] = await deps.db.select({ payloadAccess: gatewayKeys.payloadAccess, plan: organizations.plan, retentionDays: orgSettings.promptLoggingRetentionDays })
      .from(gatewayKeys)
      .innerJoin(organizations, eq(organizations.id, gatewayKeys.orgId))
      .leftJoin(orgSettings, eq(orgSettings.id, gatewayKeys.orgId))
      .where(eq(gatewayKeys.id, key.keyId));
    const plan: Plan = found?.plan ?? 'trial';
    const reach = keyReach(key);
    const keyIds = reach.lineageId === null ? undefined : await lineageKeyIds(deps.db, reach.orgId, reach.lineageId);
    return {
      scope: { orgId: key.orgId, plan, now: deps.clock.now(), keyIds },
      payloadAccess: found?.payloadAccess ?? false,
      retentionDays: found?.retentionDays ?? DEFAULT_PROMPT_RETENTION_DAYS,
    };
  }

  router.get('/requests', async (ctx) => {
    const key = ctx.state.key!;
    checkAccess(key);
    const query = parseRequestLogQuery(ctx.query as QueryParams);
    const { scope } = await readerFor(key);
    ctx.body = await listRequestLogs(deps.db, scope, query, presentRequestLog);
  });

  router.get('/requests/:id', async (ctx) => {
    const { scope, payloadAccess, retentionDays } = await readerFor(ctx.state.key!);
    const id = ctx.params.id!;
    const row = await findRequestLog(deps.db, scope, id);
    if (!row) throw new GatewayError('not_found', `No request \`${id}\` within this key's reach.`);
    ctx.body = payloadAccess ? withBodies(row, new Date(scope.now.getTime() - retentionDays * 86_400_000)) : presentRequestLog(row);
  });
}
