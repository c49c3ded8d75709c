import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { WorkflowIdReusePolicy } from '@temporalio/common';
import type { QueuedDelivery } from '../core/webhooks/fan-out';
import { ALERT_EVENT_TYPES, PER_REQUEST_RECEIVER } from '../core/db/schema';
import { alertAttemptDelays, webhookAttemptDelays } from '../core/webhooks/schedule';
import { scaledInfraRetry, searchAttributeKeys, taskQueue, workflowIds, type InfraRetry, type WebhookDeliveryInput } from '../workflows/definitions';

/** Starts the workflows of queued deliveries; what activities that queue events are given. */
export type StartDeliveries = (deliveries: QueuedDelivery[]) => Promise<void>;

/** Where delivery workflows run, and on which schedule of attempts: job events' and alerts' own. */
export type DeliveryStartOptions = { taskQueue: string; attemptDelaysMs: number[]; alertAttemptDelaysMs: number[]; retryMs?: InfraRetry };

const ALERT_TYPES: ReadonlySet<string> = new Set(ALERT_EVENT_TYPES);

/** The webhooks queue of a deployment and both attempt schedules, scaled by GW_SCHEDULE_SCALE. */
export function deliveryStartOptions(taskQueuePrefix: string, scheduleScale: number): DeliveryStartOptions {
  return { taskQueue: taskQueue('webhooks', taskQueuePrefix), attemptDelaysMs: webhookAttemptDelays(scheduleScale), alertAttemptDelaysMs: alertAttemptDelays(scheduleScale), retryMs: scaledInfraRetry(scheduleScale) };
}

/**
 * Starts one delivery's `webhookDelivery` workflow: true when this call started it, false when
 * its id is in use. The workflow id is the delivery id, so calling this again (a retried
 * activity) starts nothing twice. A used id is not reused, except that the sweep
 * (`restartClosed`) starts a new run after one that was terminated, failed or timed out: such a
 * run left its delivery pending, and the new one goes on from the attempts the row counted. A run
 * that completed settled its delivery and is never followed.
 */
export async function startDeliveryWorkflow(temporal: Client, options: DeliveryStartOptions, d: QueuedDelivery, how: { restartClosed?: boolean } = {}): Promise<boolean> {
  const attemptDelaysMs = ALERT_TYPES.has(d.eventType) ? options.alertAttemptDelaysMs : options.attemptDelaysMs;
  const input: WebhookDeliveryInput = { deliveryId: d.id, orgId: d.orgId, endpointId: d.endpointId, attemptDelaysMs, ...(options.retryMs && { retryMs: options.retryMs }) };
  try {
    await temporal.workflow.start('webhookDelivery', {
      workflowId: workflowIds.webhookDelivery(d.id),
      taskQueue: options.taskQueue,
      args: [input],
      workflowIdReusePolicy: how.restartClosed ? WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY : WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: [
        { key: searchAttributeKeys.orgId, value: d.orgId },
        { key: searchAttributeKeys.endpointId, value: d.endpointId ?? PER_REQUEST_RECEIVER },
        { key: searchAttributeKeys.deliveryStatus, value: 'pending' },
      ],
    });
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}

/**
 * Starts one `webhookDelivery` per queued event, after the transaction that queued it has
 * committed. A start that fails here leaves its delivery pending and overdue: the delivery
 * sweep (activities/webhook-sweep.ts) starts it later.
 */
export function createDeliveryStarter(temporal: Client, options: DeliveryStartOptions): StartDeliveries {
  return async (deliveries) => {
    await Promise.all(deliveries.map((d) => startDeliveryWorkflow(temporal, options, d)));
  };
}
