import { Context } from '@temporalio/activity';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { clearExpiredBodies, maintainPartitions, type BodyClearing, type PartitionChanges } from '../core/request-log/retention';

export type { BodyClearing, PartitionChanges };

export type RetentionDeps = { db: Database; clock: Clock };

/** One call clears bodies for at most this long, then answers where to go on (the workflow calls again). */
export const BODY_CLEAR_BUDGET_MS = 120_000;

/** The request log's hourly upkeep (core/request-log/retention.ts): day partitions and expired bodies. */
export function createRetentionActivities(deps: RetentionDeps) {
  return {
    /** Makes the day partitions ahead and drops those past the longest history window. */
    async maintainRequestLogPartitions(): Promise<PartitionChanges> {
      return maintainPartitions(deps.db, deps.clock.now());
    },

    /** Sets expired prompts and answers to NULL, keeping every other column; heartbeats each batch. */
    async clearExpiredRequestBodies(input: { afterOrgId: string | null }): Promise<BodyClearing> {
      const heartbeat = () => {
        try {
          Context.current().heartbeat();
        } catch {
          // Called outside an activity (a direct test call): nothing to report to.
        }
      };
      return clearExpiredBodies(deps.db, deps.clock.now(), { afterOrgId: input.afterOrgId, budgetMs: BODY_CLEAR_BUDGET_MS, onBatch: heartbeat });
    },
  };
}

export type RetentionActivities = ReturnType<typeof createRetentionActivities>;
