import type Router from '@koa/router';
import { and, eq, inArray, isNull, or, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import { unixOrNull } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { DELIVERY_STATUSES, jobs, webhookDeliveries } from '../../core/db/schema';
import { displayUrl } from '../../core/net/display-url';
import { DELIVERY_LOG_SIZE } from '../../core/webhooks/fan-out';
import { afterCursor, type Keyset, keysetOrder, listEnvelope, pageOf, readPage, timestampKey } from '../../core/paging';
import type { GatewayState } from '../context';
import { authorize } from '../middleware/management-auth';


const deliverySchema = z.object({
  id: z.string().meta({ description: 'The delivery id (`whd_<event id>`), also its workflow id in Temporal.' }),
  object: z.literal('webhook_delivery'),
  event_id: z.string(),
  event_type: z.string(),
  job_id: z.string().nullable(),
  endpoint_id: z.string().nullable().meta({ description: 'Null for a job\'s per-request URL.' }),
  url: z.string().meta({ description: 'The receiver\'s scheme, host and path: never its user-info or query.' }),
  status: z.enum(DELIVERY_STATUSES),
  attempts: z.number().int(),
  last_response_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  next_attempt_at: z.number().int().nullable().meta({ description: 'Unix seconds; null once finished or while an attempt is under way.' }),
  created_at: z.number().int(),
}).meta({ id: 'WebhookDelivery' });

export const deliveryListSchema = listEnvelope(deliverySchema);

type DeliveryRow = typeof webhookDeliveries.$inferSelect;

function presentDelivery(row: DeliveryRow): z.infer<typeof deliverySchema> {
  return {
    id: row.id,
    object: 'webhook_delivery',
    event_id: row.eventId,
    event_type: row.eventType,
    job_id: row.jobId,
    endpoint_id: row.endpointId,
    url: displayUrl(row.url),
    status: row.status,
    attempts: row.attempts,
    last_response_status: row.lastResponseStatus,
    last_error: row.lastError,
    next_attempt_at: unixOrNull(row.nextAttemptAt),
    created_at: unixOrNull(row.createdAt)!,
  };
}

const DELIVERY_ORDER: Keyset = { key: webhookDeliveries.createdAt, id: webhookDeliveries.id, order: 'desc', type: 'timestamptz' };

/**
 * `GET /webhook_deliveries`: the delivery log, newest first, in pages (`limit`, `after`) over
 * the latest DELIVERY_LOG_SIZE deliveries. There is no resend (spec 6.3).
 */
export function webhookDeliveryRoutes(router: Router<GatewayState>, deps: { db: Database }): void {
  router.get('/webhook_deliveries', async (ctx) => {
    const { orgId, projectIds } = authorize(ctx, 'webhooks:read');
    const page = readPage(ctx.query);
    // A token restricted to projects sees no delivery of another project's job (its per-request
    // URL is that project's); deliveries of no job (console endpoints' alerts) are the organization's.
    const visible: SQL | undefined = projectIds
      ? or(isNull(webhookDeliveries.jobId), inArray(webhookDeliveries.jobId, deps.db.select({ id: jobs.id }).from(jobs).where(and(eq(jobs.orgId, orgId), inArray(jobs.projectId, projectIds.length ? projectIds : [''])))))
      : undefined;
    // The log is the latest DELIVERY_LOG_SIZE; a page is cut from them in keyset order.
    const latest = deps.db.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(and(eq(webhookDeliveries.orgId, orgId), visible))
      .orderBy(...keysetOrder(DELIVERY_ORDER)).limit(DELIVERY_LOG_SIZE);
    const rows = await deps.db.select({ row: webhookDeliveries, at: timestampKey(webhookDeliveries.createdAt) }).from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.orgId, orgId), inArray(webhookDeliveries.id, latest), afterCursor(DELIVERY_ORDER, page.after)))
      .orderBy(...keysetOrder(DELIVERY_ORDER)).limit(page.limit + 1);
    ctx.body = pageOf(rows, page.limit, ({ row, at }) => ({ at, id: row.id }), ({ row }) => presentDelivery(row));
  });
}
