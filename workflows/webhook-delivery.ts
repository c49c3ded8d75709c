import { ActivityFailure, patched, proxyActivities, sleep, TimeoutFailure, upsertSearchAttributes } from '@temporalio/workflow';
import type { AttemptResult, WebhookDeliveryActivities } from '../activities/webhook-delivery';
import { infraRetryPolicy, searchAttributeKeys, WEBHOOK_ATTEMPT_TIMEOUT_MS, type WebhookDeliveryInput } from './definitions';

// Each attempt runs once: a retry would be an attempt the schedule did not plan.
const { attemptDelivery } = proxyActivities<WebhookDeliveryActivities>({
  startToCloseTimeout: WEBHOOK_ATTEMPT_TIMEOUT_MS,
  retry: { maximumAttempts: 1 },
});
// Recording that an attempt was lost is a database write, safe to repeat.
const { recordLostAttempt } = proxyActivities<WebhookDeliveryActivities>({ startToCloseTimeout: '1 minute', retry: infraRetryPolicy() });

/**
 * Runs started before a delivery was one activity keep their loop of timers and one-shot
 * attempts; new runs make every attempt in `deliver`, whose retries carry the schedule.
 */
export const DELIVERY_RIDES_RETRY_POLICY = 'delivery-rides-retry-policy';

/**
 * `deliver`'s options: one activity attempt per delivery attempt, the wait between two set by
 * the activity (`nextRetryDelay`). The policy's own backoff paces a retry after an attempt that
 * never reported (a lost worker, the answer timeout: the row counted it before its POST, and
 * the retry records it lost) or after our own error (Postgres away), which spends no attempt.
 * The row's count ends the delivery after the schedule's last attempt, so the policy has no
 * limit of its own (issue 55: one did, and half an hour of Postgres errors failed deliveries).
 */
const deliverOptions = (retry: WebhookDeliveryInput['retryMs']) => ({
  startToCloseTimeout: WEBHOOK_ATTEMPT_TIMEOUT_MS,
  retry: infraRetryPolicy(retry),
});

/**
 * Why an attempt did not finish, as the delivery log shows it to the customer: a timeout says
 * so; anything else is ours, and its text (a failed query's) is not theirs to read (issue 55).
 */
function lostReason(err: ActivityFailure): string {
  return err.cause instanceof TimeoutFailure ? 'it timed out' : 'an error on the gateway\'s side';
}

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
    const { deliver } = proxyActivities<WebhookDeliveryActivities>(deliverOptions(input.retryMs));
    try {
      result = await deliver({ deliveryId: input.deliveryId, attemptDelaysMs: input.attemptDelaysMs });
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      // Every retry spent (receivers that never answer in time, workers lost again and again).
      result = await recordLostAttempt({ deliveryId: input.deliveryId, attempt: input.attemptDelaysMs.length, nextAttemptInMs: null, reason: lostReason(err) });
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
      result = await recordLostAttempt({ ...attempt, reason: lostReason(err) });
    }
    if (result.status !== 'pending') break;
  }
  upsertSearchAttributes([{ key: searchAttributeKeys.deliveryStatus, value: result.status }]);
  return result;
}
