import { ActivityFailure, patched, proxyActivities, sleep, upsertSearchAttributes } from '@temporalio/workflow';
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
 * Runs started before a delivery was one activity keep their loop of timers and one-shot
 * attempts; new runs make every attempt in `deliver`, whose retries carry the schedule.
 */
export const DELIVERY_RIDES_RETRY_POLICY = 'delivery-rides-retry-policy';

/**
 * `deliver`'s options: one activity attempt per delivery attempt, the wait between two set by
 * the activity (`nextRetryDelay`); the policy's own backoff only paces a retry after an attempt
 * that never reported (a lost worker, the answer timeout), which the activity then spaces out.
 * The attempts allow three per planned attempt before the workflow records the delivery failed.
 */
const deliverOptions = (attempts: number) => ({
  startToCloseTimeout: WEBHOOK_ATTEMPT_TIMEOUT_MS,
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: attempts * 3 },
});

/**
 * One event to one receiver (spec 6.3), id `whd_<event id>`. Attempts follow the schedule in
 * its input (the wait before each); the first 2xx ends it `succeeded`, the last failure
 * `failed`. The job it announces is unaffected either way.
 */
export async function webhookDelivery(input: WebhookDeliveryInput): Promise<AttemptResult> {
  let result: AttemptResult = { status: 'pending' };
  if (patched(DELIVERY_RIDES_RETRY_POLICY)) {
    const [firstWait = 0] = input.attemptDelaysMs;
    if (firstWait > 0) await sleep(firstWait);
    const { deliver } = proxyActivities<WebhookDeliveryActivities>(deliverOptions(input.attemptDelaysMs.length));
    try {
      result = await deliver({ deliveryId: input.deliveryId, attemptDelaysMs: input.attemptDelaysMs });
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      // Every retry spent (receivers that never answer in time, workers lost again and again).
      result = await recordLostAttempt({ deliveryId: input.deliveryId, attempt: input.attemptDelaysMs.length, nextAttemptInMs: null, reason: err.cause?.message ?? err.message });
    }
    upsertSearchAttributes([{ key: searchAttributeKeys.deliveryStatus, value: result.status }]);
    return result;
  }
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
