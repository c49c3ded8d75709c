import type { Client } from '@temporalio/client';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { unattemptedDeliveries } from '../core/webhooks/fan-out';
import { WEBHOOK_SWEEP_GRACE_MS, WEBHOOK_SWEEP_MAX_AGE_MS } from '../core/webhooks/schedule';
import { startDeliveryWorkflow, type DeliveryStartOptions } from './webhook-dispatch';

export type WebhookSweepDeps = { db: Database; clock: Clock; temporal: Client; deliveries: DeliveryStartOptions };

/** One page of the sweep: deliveries looked at, workflows this page started, and where to go on. */
export type SweepPage = { checked: number; started: number; afterId: string | null; done: boolean };

/**
 * The delivery sweep (issue 20): a delivery is queued in a transaction and its workflow started
 * after the commit (DESIGN 6.9); when that start fails (Temporal unreachable, the process gone)
 * nothing else would ever start it. The sweep starts the workflow of every delivery, job event or
 * alert alike, that is still pending and unattempted past a grace period (and not older than
 * WEBHOOK_SWEEP_MAX_AGE_MS).
 */
export function createWebhookSweepActivities(deps: WebhookSweepDeps) {
  return {
    /**
     * Starts the workflows of one page of such deliveries, side by side. A delivery whose workflow
     * was started meanwhile (already started: its id is a business id) is done as well.
     */
    async sweepUnstartedDeliveries(input: { afterId: string | null; limit: number }): Promise<SweepPage> {
      const now = deps.clock.now().getTime();
      const window = { queuedAfter: new Date(now - WEBHOOK_SWEEP_MAX_AGE_MS), queuedBefore: new Date(now - WEBHOOK_SWEEP_GRACE_MS) };
      const page = await unattemptedDeliveries(deps.db, { ...window, afterId: input.afterId, limit: input.limit });
      const started = await Promise.all(page.map((d) => startDeliveryWorkflow(deps.temporal, deps.deliveries, d)));
      return {
        checked: page.length,
        started: started.filter(Boolean).length,
        afterId: page.length > 0 ? page[page.length - 1]!.id : input.afterId,
        done: page.length < input.limit,
      };
    },
  };
}

export type WebhookSweepActivities = ReturnType<typeof createWebhookSweepActivities>;
