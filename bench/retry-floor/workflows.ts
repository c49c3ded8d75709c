import { proxyActivities } from '@temporalio/workflow';

type FloorActivities = { poll(attempts: number): Promise<void> };

/** One activity that fails `attempts - 1` times with its own `nextRetryDelay`, then succeeds. */
export async function floor(attempts: number): Promise<void> {
  const { poll } = proxyActivities<FloorActivities>({ startToCloseTimeout: '10 seconds', retry: { initialInterval: '1 second', maximumAttempts: attempts + 5 } });
  await poll(attempts);
}
