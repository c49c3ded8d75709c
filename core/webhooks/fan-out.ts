import { and, asc, eq, gt, isNull, lt, sql } from 'drizzle-orm';
import { unixSeconds } from '../clock';
import type { Executor } from '../db/client';
import { PER_REQUEST_RECEIVER, webhookDeliveries, webhookEndpoints, type JobWebhook } from '../db/schema';
import { newId } from '../ids';

/** Where one event goes: a console endpoint, or the job's own per-request URL. */
export type Receiver = {
  receiver: string;
  endpointId: string | null;
  url: string;
  /** A body of the receiver's own (a chat app message, an email) instead of the event envelope. */
  body?: string;
};

/** A queued delivery, as the starter of its `webhookDelivery` workflow needs it. */
export type QueuedDelivery = { id: string; orgId: string; eventId: string; eventType: string; endpointId: string | null };

/** Spec 6.3 rule 4: the console log keeps an organization's latest 100 deliveries. */
export const DELIVERY_LOG_SIZE = 100;

/** The delivery's id is its workflow id: `whd_<event id>`. */
export function deliveryIdOf(eventId: string): string {
  return `whd_${eventId}`;
}

const activeEndpoints = (orgId: string) => and(eq(webhookEndpoints.orgId, orgId), isNull(webhookEndpoints.deletedAt));

/**
 * Receivers of a job event (spec 6.1, 4.2): a per-request `webhook` replaces the console
 * endpoints for its job (its own `events`); otherwise every active console endpoint subscribed
 * to the type.
 */
export async function jobEventReceivers(db: Executor, job: { orgId: string; webhook: JobWebhook | null }, type: string): Promise<Receiver[]> {
  if (job.webhook) return job.webhook.events.includes(type) ? [{ receiver: PER_REQUEST_RECEIVER, endpointId: null, url: job.webhook.url }] : [];
  return endpointReceivers(db, job.orgId, type);
}

/** Every active console endpoint of the organization subscribed to the type (job and batch events alike). */
export async function endpointReceivers(db: Executor, orgId: string, type: string): Promise<Receiver[]> {
  const rows = await db.select({ id: webhookEndpoints.id, url: webhookEndpoints.url }).from(webhookEndpoints)
    .where(and(activeEndpoints(orgId), sql`${type} = any(${webhookEndpoints.events})`));
  return rows.map((r) => ({ receiver: r.id, endpointId: r.id, url: r.url }));
}

/**
 * Queues one event per receiver, each with its own `evt_` id and the envelope's exact bytes
 * (spec 2.3; or the receiver's own `body`: an alert to a chat app or by email), in the caller's
 * transaction. A job's receiver gets one event however often this
 * runs (unique per job and receiver), so a retried transition cannot double it.
 */
export async function queueEvents(db: Executor, event: { orgId: string; type: string; data: unknown; jobId: string | null; now: Date }, receivers: Receiver[]): Promise<QueuedDelivery[]> {
  if (receivers.length === 0) return [];
  const rows = receivers.map((r) => {
    const eventId = newId('evt', event.now.getTime());
    const payload = r.body ?? JSON.stringify({ id: eventId, type: event.type, created_at: unixSeconds(event.now), data: event.data });
    return {
      id: deliveryIdOf(eventId), orgId: event.orgId, eventId, eventType: event.type, jobId: event.jobId,
      endpointId: r.endpointId, receiver: r.receiver, url: r.url, payload, createdAt: event.now, updatedAt: event.now, nextAttemptAt: event.now,
    };
  });
  const inserted = await db.insert(webhookDeliveries).values(rows).onConflictDoNothing()
    .returning({ id: webhookDeliveries.id, orgId: webhookDeliveries.orgId, eventId: webhookDeliveries.eventId, eventType: webhookDeliveries.eventType, endpointId: webhookDeliveries.endpointId });
  return inserted;
}

/** A job's deliveries still to be made: what a retried terminal step (re)starts. */
export async function pendingJobDeliveries(db: Executor, jobId: string): Promise<QueuedDelivery[]> {
  return db.select({ id: webhookDeliveries.id, orgId: webhookDeliveries.orgId, eventId: webhookDeliveries.eventId, eventType: webhookDeliveries.eventType, endpointId: webhookDeliveries.endpointId })
    .from(webhookDeliveries).where(and(eq(webhookDeliveries.jobId, jobId), eq(webhookDeliveries.status, 'pending')));
}

/**
 * Pending deliveries of any event (job or alert) whose next step is overdue by `dueBefore`, in id
 * order after `afterId`: what the sweep (re)starts. A pending delivery's next step is its next
 * attempt (`next_attempt_at`, the queueing time before the first) or, while an attempt is under
 * way, the end of that attempt (`updated_at`). A live workflow keeps it on time, so one this late
 * has no workflow making progress: its start after the commit failed, or its workflow was
 * terminated, timed out or lost. Read through the partial index on pending rows, which holds only
 * deliveries in flight. Starting a live workflow again is harmless, the delivery id being its id.
 */
export async function overdueDeliveries(db: Executor, page: { dueBefore: Date; afterId: string | null; limit: number }): Promise<QueuedDelivery[]> {
  return db.select({ id: webhookDeliveries.id, orgId: webhookDeliveries.orgId, eventId: webhookDeliveries.eventId, eventType: webhookDeliveries.eventType, endpointId: webhookDeliveries.endpointId })
    .from(webhookDeliveries)
    .where(and(
      eq(webhookDeliveries.status, 'pending'),
      lt(sql`coalesce(${webhookDeliveries.nextAttemptAt}, ${webhookDeliveries.updatedAt})`, page.dueBefore),
      page.afterId ? gt(webhookDeliveries.id, page.afterId) : undefined,
    ))
    .orderBy(asc(webhookDeliveries.id)).limit(page.limit);
}

/**
 * Deletes up to `limit` settled deliveries (succeeded or failed) that have left their
 * organization's delivery log (its latest `keep`, spec 6.3 rule 4) and settled before
 * `settledBefore`; answers how many. Pending ones are never pruned. Each organization's edge is
 * found through its (org, created_at) index, so the cost follows what is pruned, not the table.
 */
export async function pruneSettledDeliveries(db: Executor, page: { keep: number; settledBefore: Date; limit: number }): Promise<number> {
  const result = await db.execute(sql`
    delete from webhook_deliveries where id in (
      select d.id from (
        select o.id as org_id, edge.created_at, edge.id from organizations o
        cross join lateral (
          select w.created_at, w.id from webhook_deliveries w where w.org_id = o.id
          order by w.created_at desc, w.id desc offset ${page.keep - 1} limit 1
        ) edge
      ) log_edge
      join webhook_deliveries d on d.org_id = log_edge.org_id and (d.created_at, d.id) < (log_edge.created_at, log_edge.id)
      where d.status <> 'pending' and d.updated_at < ${page.settledBefore.toISOString()}::timestamptz
      limit ${page.limit}
    )`);
  return result.rowCount ?? 0;
}
