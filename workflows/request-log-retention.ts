import { patched, proxyActivities } from '@temporalio/workflow';
import type { BodyClearing, RetentionActivities } from '../activities/request-log-retention';
import type { ExpiredObjectDeletion } from '../core/storage/expired-objects';
import { REQUEST_LOG_RETENTION_MAX_CLEAR_CALLS, REQUEST_LOG_RETENTION_MAX_MEDIA_CALLS, type RequestLogRetentionResult } from './definitions';

const { maintainRequestLogPartitions } = proxyActivities<RetentionActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

const { clearExpiredRequestBodies, deleteExpiredMediaFiles, deleteExpiredJobOutputs } = proxyActivities<RetentionActivities>({
  // Each call stops itself after about 2 minutes and heartbeats every batch.
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

/**
 * Runs started before media files existed replay without the deletion step: their histories
 * end (or stop) right after the body clearing, where this step now issues its commands.
 */
export const MEDIA_FILES_RETENTION_PATCH = 'media-files-retention';

/**
 * Runs started before video outputs were deleted here (each job's workflow slept until its
 * output expired) replay without this step.
 */
export const JOB_OUTPUTS_RETENTION_PATCH = 'job-outputs-retention';

/**
 * One hourly run of the retention (started by the `gw-request-log-retention` schedule): the
 * request log's day partitions, then its expired bodies, organization by organization, then
 * media files past their link's expiry, then video outputs past theirs, each in calls that stop after a time budget. A backlog
 * larger than a run's calls is finished by the next runs; the schedule skips a run while one is
 * still going.
 */
export async function requestLogRetention(): Promise<RequestLogRetentionResult> {
  const partitions = await maintainRequestLogPartitions();
  let bodiesCleared = 0;
  let bodiesDone = false;
  let afterOrgId: string | null = null;
  for (let call = 0; call < REQUEST_LOG_RETENTION_MAX_CLEAR_CALLS && !bodiesDone; call++) {
    const step: BodyClearing = await clearExpiredRequestBodies({ afterOrgId });
    bodiesCleared += step.cleared;
    bodiesDone = step.done;
    afterOrgId = step.afterOrgId;
  }
  const media = patched(MEDIA_FILES_RETENTION_PATCH) ? await deleteInCalls(deleteExpiredMediaFiles) : NOTHING_DELETED;
  const outputs = patched(JOB_OUTPUTS_RETENTION_PATCH) ? await deleteInCalls(deleteExpiredJobOutputs) : NOTHING_DELETED;
  return {
    partitionsCreated: partitions.created, partitionsDropped: partitions.dropped, bodiesCleared,
    mediaFilesDeleted: media.deleted, jobOutputsDeleted: outputs.deleted, finished: bodiesDone && media.done && outputs.done,
  };
}

const NOTHING_DELETED: ExpiredObjectDeletion = { deleted: 0, failed: 0, done: true };

/** Calls a deletion step until it is done, at most REQUEST_LOG_RETENTION_MAX_MEDIA_CALLS times (each about 2 minutes at most). */
async function deleteInCalls(step: () => Promise<ExpiredObjectDeletion>): Promise<{ deleted: number; done: boolean }> {
  let deleted = 0;
  for (let call = 0; call < REQUEST_LOG_RETENTION_MAX_MEDIA_CALLS; call++) {
    const result = await step();
    deleted += result.deleted;
    if (result.done) return { deleted, done: true };
  }
  return { deleted, done: false };
}
