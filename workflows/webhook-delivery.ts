import { ActivityFailure, proxyActivities, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type { AttemptResult, WebhookDeliveryActivities } from '../activities/webhook-delivery';
import { searchAttributeKeys, WEBHOOK_ATTEMPT_TIMEOUT_MS, type WebhookDeliveryInput } from './definitions';

// Each attempt runs once: a retry would be an attempt the schedule did not plan.
const { attemptDelivery } = proxyActivities<WebhookDeliveryActivities>({
  startToCloseTimeout: WEBHOOK_ATTEMPT_TIMEOUT_MS,
  retry: { maximumAttempts: 1 },
});
// Recording that an attempt was lost is a database write, safe to repeat.
const { recordLostAttempt } = proxyActivities<WebhookDeliveryActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

/**
 * One event to one receiver (spec 6.3), id `whd_<event id>`. Attempts follow the schedule in
 * its input (the wait before each); the first 2xx ends it `succeeded`, the last failure
 * `failed`. The job it announces is unaffected either way.
 */
export async function webhookDelivery(input: WebhookDeliveryInput): Promise<AttemptResult> {
  let result: AttemptResult = { status: 'pending' };
  for (const [index, delay] of input.attemptDelaysMs.entries()) {
    if (delay > 0) await sleep(delay);
    const attempt = { deliveryId: input.deliveryId, attempt: index + 1, nextAttemptInMs: input.attemptDelaysMs[index + 1] ?? null };
    try {
      result = await attemptDelivery(attempt);
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      result = await recordLostAttempt({ ...attempt, reason: err.cause?.message ?? err.message });
    }
    if (result.status !== 'pending') break;
  }
  upsertSearchAttributes([{ key: searchAttributeKeys.deliveryStatus, value: result.status }]);
  return result;
}
