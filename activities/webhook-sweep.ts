import type { Client } from '@temporalio/client';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { DELIVERY_LOG_SIZE, overdueDeliveries, pruneSettledDeliveries } from '../core/webhooks/fan-out';
import { DELIVERY_PRUNE_AFTER_MS, DELIVERY_PRUNE_BATCH, WEBHOOK_SWEEP_GRACE_MS } from '../core/webhooks/schedule';
import { startDeliveryWorkflow, type DeliveryStartOptions } from './webhook-dispatch';

export type WebhookSweepDeps = { db: Database; clock: Clock; temporal: Client; deliveries: DeliveryStartOptions };

/** One page of the sweep: deliveries looked at, workflows this page started, and where to go on. */
export type SweepPage = { checked: number; started: number; afterId: string | null; done: boolean };

/**
 * The delivery sweep (issues 20, 34): a delivery is queued in a transaction and its workflow
 * started after the commit (DESIGN 6.9). When that start fails (Temporal unreachable, the
 * process gone), or the workflow later stops short of settling the delivery (terminated by an
 * operator, timed out, its history lost), nothing else would ever make the rest of its attempts.
 * The sweep starts the workflow of every pending delivery, job event or alert alike, whose next
 * step is overdue by a grace period; the workflow goes on from the attempts the row has counted.
 */
export function createWebhookSweepActivities(deps: WebhookSweepDeps) {
  /**
   * Starts the workflows of one page of such deliveries, side by side. A delivery whose workflow
   * is running (started meanwhile, or just late) is done as well: "already started".
   */
  async function sweepOverdueDeliveries(input: { afterId: string | null; limit: number }): Promise<SweepPage> {
    const dueBefore = new Date(deps.clock.now().getTime() - WEBHOOK_SWEEP_GRACE_MS);
    const page = await overdueDeliveries(deps.db, { dueBefore, afterId: input.afterId, limit: input.limit });
    const started = await Promise.all(page.map((d) => startDeliveryWorkflow(deps.temporal, deps.deliveries, d, { restartClosed: true })));
    return {
      checked: page.length,
      started: started.filter(Boolean).length,
      afterId: page.length > 0 ? page[page.length - 1]!.id : input.afterId,
      done: page.length < input.limit,
    };
  }

  return {
    sweepOverdueDeliveries,
    /** The name runs started before issue 34 schedule (the sweep then took unattempted deliveries only). */
    sweepUnstartedDeliveries: sweepOverdueDeliveries,

    /** Deletes settled deliveries that left their organization's log a week ago or more; answers how many. */
    async pruneSettledDeliveries(): Promise<{ pruned: number }> {
      const settledBefore = new Date(deps.clock.now().getTime() - DELIVERY_PRUNE_AFTER_MS);
      return { pruned: await pruneSettledDeliveries(deps.db, { keep: DELIVERY_LOG_SIZE, settledBefore, limit: DELIVERY_PRUNE_BATCH }) };
    },
  };
}

export type WebhookSweepActivities = ReturnType<typeof createWebhookSweepActivities>;
