import { proxyActivities, sleep } from '@temporalio/workflow';
import type { SecretRotationActivities } from '../activities/secret-rotation';
import type { SecretRotationInput } from './definitions';

const { dropRetiredSecrets } = proxyActivities<SecretRotationActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

/**
 * Stops a rotated-out webhook secret signing once its 24 hours end. One workflow per endpoint:
 * a rotation during another's window joins the running workflow, which keeps going until no
 * retired secret is left.
 */
export async function secretRotation(input: SecretRotationInput): Promise<{ dropped: number }> {
  let retireAt: string | null = input.retireAt;
  let dropped = 0;
  while (retireAt !== null) {
    const wait = Date.parse(retireAt) - Date.now();
    if (wait > 0) await sleep(wait);
    const result = await dropRetiredSecrets({ orgId: input.orgId, endpointId: input.endpointId });
    dropped += result.dropped;
    retireAt = result.nextRetireAt;
  }
  return { dropped };
}
