import { patched, proxyActivities } from '@temporalio/workflow';
import type { BodyClearing, JobOutputDeletion, MediaFileDeletion, RetentionActivities } from '../activities/request-log-retention';
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
  let mediaFilesDeleted = 0;
  let mediaDone = true;
  if (patched(MEDIA_FILES_RETENTION_PATCH)) {
    mediaDone = false;
    for (let call = 0; call < REQUEST_LOG_RETENTION_MAX_MEDIA_CALLS && !mediaDone; call++) {
      const step: MediaFileDeletion = await deleteExpiredMediaFiles();
      mediaFilesDeleted += step.deleted;
      mediaDone = step.done;
    }
  }
  let jobOutputsDeleted = 0;
  let outputsDone = true;
  if (patched(JOB_OUTPUTS_RETENTION_PATCH)) {
    outputsDone = false;
    for (let call = 0; call < REQUEST_LOG_RETENTION_MAX_MEDIA_CALLS && !outputsDone; call++) {
      const step: JobOutputDeletion = await deleteExpiredJobOutputs();
      jobOutputsDeleted += step.deleted;
      outputsDone = step.done;
    }
  }
  return { partitionsCreated: partitions.created, partitionsDropped: partitions.dropped, bodiesCleared, mediaFilesDeleted, jobOutputsDeleted, finished: bodiesDone && mediaDone && outputsDone };
}
