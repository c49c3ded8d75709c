import { proxyActivities } from '@temporalio/workflow';
import type { ProbeActivities } from '../activities/probe';

export type ProbeInput = { message: string };
export type ProbeResult = { message: string; handledBy: string };

const { echo } = proxyActivities<ProbeActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { maximumAttempts: 3 },
});

/** Proves the durable path end to end: a workflow on a queue runs an activity a worker serves. */
export async function probeWorkflow(input: ProbeInput): Promise<ProbeResult> {
  return echo(input.message);
}
