import { proxyActivities, sleep } from '@temporalio/workflow';
import type { KeyRotationActivities } from '../activities/key-rotation';
import type { KeyRotationInput } from './definitions';

const { revokeRotatedKey } = proxyActivities<KeyRotationActivities>({
  startToCloseTimeout: '30 seconds',
  // Postgres may be briefly away; the revocation must still happen, so keep trying.
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

/**
 * Ends a key rotation's overlap: sleeps until `revokeAt`, then revokes the old key. The timer
 * is durable, so the key is revoked on time even if every worker restarts in between.
 */
export async function keyRotation(input: KeyRotationInput): Promise<{ revoked: boolean }> {
  const wait = Date.parse(input.revokeAt) - Date.now();
  if (wait > 0) await sleep(wait);
  return revokeRotatedKey({ orgId: input.orgId, keyId: input.oldKeyId });
}
