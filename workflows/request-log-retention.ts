import { proxyActivities } from '@temporalio/workflow';
import type { BodyClearing, RetentionActivities } from '../activities/request-log-retention';
import { REQUEST_LOG_RETENTION_MAX_CLEAR_CALLS, type RequestLogRetentionResult } from './definitions';

const { maintainRequestLogPartitions } = proxyActivities<RetentionActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

const { clearExpiredRequestBodies } = proxyActivities<RetentionActivities>({
  // Each call stops itself after about 2 minutes and heartbeats every batch.
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

/**
 * One hourly run of the request log's retention (started by the `gw-request-log-retention`
 * schedule): day partitions first, then expired bodies, organization by organization, in calls
 * that each stop after a time budget. A backlog larger than a run's calls is finished by the
 * next runs; the schedule skips a run while one is still going.
 */
export async function requestLogRetention(): Promise<RequestLogRetentionResult> {
  const partitions = await maintainRequestLogPartitions();
  let bodiesCleared = 0;
  let afterOrgId: string | null = null;
  for (let call = 0; call < REQUEST_LOG_RETENTION_MAX_CLEAR_CALLS; call++) {
    const step: BodyClearing = await clearExpiredRequestBodies({ afterOrgId });
    bodiesCleared += step.cleared;
    if (step.done) return { partitionsCreated: partitions.created, partitionsDropped: partitions.dropped, bodiesCleared, finished: true };
    afterOrgId = step.afterOrgId;
  }
  return { partitionsCreated: partitions.created, partitionsDropped: partitions.dropped, bodiesCleared, finished: false };
}
