import { proxyActivities, sleep } from '@temporalio/workflow';
import type { KeyRotationActivities } from '../activities/key-rotation';
import { ROTATION_COMMIT_GRACE_MS, type KeyRotationInput } from './definitions';

const { revokeRotatedKey } = proxyActivities<KeyRotationActivities>({
  startToCloseTimeout: '30 seconds',
  // Postgres may be briefly away; the revocation must still happen, so keep trying.
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

/**
 * Ends a key rotation's overlap: sleeps until `revokeAt`, then revokes the old key. The timer
 * is durable, so the key is revoked on time even if every worker restarts in between. The
 * workflow is started before the rotation commits, so the key's row has the last word: a later
 * end there means sleep again; no successor yet means look once more after a grace period,
 * and then give up (the rotation never committed).
 */
export async function keyRotation(input: KeyRotationInput): Promise<{ revoked: boolean }> {
  let wait = Date.parse(input.revokeAt) - Date.now();
  let graceUsed = false;
  for (;;) {
    if (wait > 0) await sleep(wait);
    const outcome = await revokeRotatedKey({ orgId: input.orgId, keyId: input.oldKeyId });
    if (outcome.state === 'not_due') {
      wait = Date.parse(outcome.dueAt) - Date.now();
    } else if (outcome.state === 'not_rotated' && !graceUsed) {
      graceUsed = true;
      wait = ROTATION_COMMIT_GRACE_MS;
    } else {
      return { revoked: outcome.state === 'revoked' };
    }
  }
}
