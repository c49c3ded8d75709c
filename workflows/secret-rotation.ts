import { condition, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { SecretRotationActivities } from '../activities/secret-rotation';
import type { SecretRotationInput } from './definitions';

const { dropRetiredSecrets } = proxyActivities<SecretRotationActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

/**
 * A rotation's retire time (ISO 8601), sent with signal-with-start by every rotation. Defined
 * here and imported by the API: only a plain definition, no workflow code runs outside.
 */
export const retireSecretSignal = defineSignal<[{ retireAt: string }]>('retireSecret');

/**
 * Stops a rotated-out webhook secret signing once its 24 hours end. One workflow per endpoint,
 * reached by signal-with-start: every rotation signals its retire time, starting the workflow
 * if none runs. The workflow ends only when its last check found no retired secret left and no
 * rotation signalled since; a signal that lands while it is completing makes Temporal refuse the
 * completion, and the retried task sees the signal first. So no rotation is lost.
 */
export async function secretRotation(input: SecretRotationInput): Promise<{ dropped: number }> {
  // Retire times announced (by the start and by signals) and not yet covered by a check.
  const announced: number[] = [];
  const announce = (retireAt: string) => {
    const at = Date.parse(retireAt);
    if (Number.isFinite(at)) announced.push(at);
  };
  announce(input.retireAt);
  setHandler(retireSecretSignal, ({ retireAt }) => announce(retireAt));
  // The next end the last check found still ahead.
  let next: number | null = null;
  const due = () => Math.min(next ?? Infinity, ...announced);
  let dropped = 0;
  while (due() !== Infinity) {
    const target = due();
    const wait = target - Date.now();
    if (wait > 0) {
      // An earlier retire time announced meanwhile wakes the wait up.
      await condition(() => due() < target, wait);
      continue;
    }
    // This check covers the announced times that are due: the rotation that announced one
    // signals just before its transaction, which has long committed (or failed, leaving
    // nothing to drop) by the time its 24 hours are up.
    const checkedAt = Date.now();
    for (let i = announced.length - 1; i >= 0; i--) if (announced[i]! <= checkedAt) announced.splice(i, 1);
    const result = await dropRetiredSecrets({ orgId: input.orgId, endpointId: input.endpointId });
    dropped += result.dropped;
    next = result.nextRetireAt === null ? null : Date.parse(result.nextRetireAt);
  }
  return { dropped };
}
