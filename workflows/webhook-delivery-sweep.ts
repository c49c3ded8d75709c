import { proxyActivities } from '@temporalio/workflow';
import type { SweepPage, WebhookSweepActivities } from '../activities/webhook-sweep';
import { WEBHOOK_SWEEP_MAX_PAGES, WEBHOOK_SWEEP_PAGE_SIZE, type WebhookSweepResult } from './definitions';

// A page is one query and at most a page of workflow starts, each idempotent: safe to retry.
const { sweepUnstartedDeliveries } = proxyActivities<WebhookSweepActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

/**
 * One run of the delivery sweep (started by the `gw-webhook-delivery-sweep` schedule): walks the
 * pending, never attempted deliveries past their grace period in id order, a page at a time, and
 * starts their workflows.
 */
export async function webhookDeliverySweep(): Promise<WebhookSweepResult> {
  const result: WebhookSweepResult = { checked: 0, started: 0, finished: false };
  let afterId: string | null = null;
  for (let page = 0; page < WEBHOOK_SWEEP_MAX_PAGES && !result.finished; page++) {
    const step: SweepPage = await sweepUnstartedDeliveries({ afterId, limit: WEBHOOK_SWEEP_PAGE_SIZE });
    result.checked += step.checked;
    result.started += step.started;
    result.finished = step.done;
    afterId = step.afterId;
  }
  return result;
}
