import { Context } from '@temporalio/activity';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { deleteExpiredJobOutputs, type JobOutputDeletion } from '../core/jobs/expired-outputs';
import { deleteExpiredMediaFiles, type MediaFileDeletion } from '../core/media/expired-files';
import { clearExpiredBodies, maintainPartitions, type BodyClearing, type PartitionChanges } from '../core/request-log/retention';
import { deleteExpiredStoredResponses } from '../core/responses/stored-responses';
import type { OutputStorage } from '../core/storage/output-storage';

export type { BodyClearing, JobOutputDeletion, MediaFileDeletion, PartitionChanges };

export type RetentionDeps = { db: Database; clock: Clock; storage: OutputStorage };

/** One call clears bodies for at most this long, then answers where to go on (the workflow calls again). */
export const BODY_CLEAR_BUDGET_MS = 120_000;
/** One call deletes media files for at most this long; the workflow calls again while some are left. */
export const MEDIA_DELETE_BUDGET_MS = 120_000;

function heartbeat(): void {
  try {
    Context.current().heartbeat();
  } catch {
    // Called outside an activity (a direct test call): nothing to report to.
  }
}

/**
 * The hourly upkeep run by `requestLogRetention`: the request log's day partitions and expired
 * bodies (core/request-log/retention.ts), media files past their link's expiry
 * (core/media/expired-files.ts) and video outputs past theirs (core/jobs/expired-outputs.ts).
 */
export function createRetentionActivities(deps: RetentionDeps) {
  return {
    /** Makes the day partitions ahead and drops those past the longest history window. */
    async maintainRequestLogPartitions(): Promise<PartitionChanges> {
      return maintainPartitions(deps.db, deps.clock.now());
    },

    /**
     * Sets expired prompts and answers to NULL, keeping every other column; heartbeats each batch.
     * Kept Responses (`store: true`) are prompts and answers on the same clock: the first call
     * of a run deletes those past their retention (they read as gone from that moment anyway).
     */
    async clearExpiredRequestBodies(input: { afterOrgId: string | null }): Promise<BodyClearing> {
      const now = deps.clock.now();
      if (input.afterOrgId === null) await deleteExpiredStoredResponses(deps.db, now, { budgetMs: BODY_CLEAR_BUDGET_MS / 4, onBatch: heartbeat });
      return clearExpiredBodies(deps.db, now, { afterOrgId: input.afterOrgId, budgetMs: BODY_CLEAR_BUDGET_MS, onBatch: heartbeat });
    },

    /** Deletes expired media files, the stored object then the row; heartbeats each batch. */
    async deleteExpiredMediaFiles(): Promise<MediaFileDeletion> {
      return deleteExpiredMediaFiles(deps.db, deps.storage, deps.clock.now(), { budgetMs: MEDIA_DELETE_BUDGET_MS, onBatch: heartbeat });
    },

    /** Deletes video outputs past their link's expiry (spec 3.1); the job keeps its row with no output. */
    async deleteExpiredJobOutputs(): Promise<JobOutputDeletion> {
      return deleteExpiredJobOutputs(deps.db, deps.storage, deps.clock.now(), { budgetMs: MEDIA_DELETE_BUDGET_MS, onBatch: heartbeat });
    },
  };
}

export type RetentionActivities = ReturnType<typeof createRetentionActivities>;
