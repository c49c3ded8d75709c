import { and, asc, eq, gt, inArray, isNotNull, lte, or, sql } from 'drizzle-orm';
import type { Database } from '../db/client';
import { jobs } from '../db/schema';
import { deleteExpiredObjects, type ExpiredObjectDeletion } from '../storage/expired-objects';
import type { OutputStorage } from '../storage/output-storage';

/** Outputs removed per batch: one SELECT, this many storage removals, one UPDATE. */
export const JOB_OUTPUT_DELETE_BATCH_ROWS = 200;

export type JobOutputDeletion = ExpiredObjectDeletion;

/**
 * Spec 3.1: when a job's output link expires the file is deleted, and the job keeps being
 * readable with `output` and `expires_at` null. Run by the hourly retention schedule, so a
 * job's workflow ends with the job instead of sleeping out its retention. The link answers 404
 * from `expires_at` alone, before this runs.
 */
export async function deleteExpiredJobOutputs(
  db: Database,
  storage: OutputStorage,
  now: Date,
  options: { budgetMs: number; batchRows?: number; onBatch?: () => void },
): Promise<JobOutputDeletion> {
  return deleteExpiredObjects(storage, {
    page: async (after, limit) => {
      const expired = and(isNotNull(jobs.expiresAt), lte(jobs.expiresAt, now));
      const rows = await db
        .select({ id: jobs.id, storageKey: sql<string | null>`${jobs.output}->>'storage_key'`, expiresAt: jobs.expiresAt })
        .from(jobs)
        .where(after ? and(expired, or(gt(jobs.expiresAt, after.expiresAt), and(eq(jobs.expiresAt, after.expiresAt), gt(jobs.id, after.id)))) : expired)
        .orderBy(asc(jobs.expiresAt), asc(jobs.id))
        .limit(limit);
      return rows.map((r) => ({ id: r.id, storageKey: r.storageKey, expiresAt: r.expiresAt! }));
    },
    forget: async (ids) => void (await db.update(jobs).set({ output: null, expiresAt: null, updatedAt: now }).where(inArray(jobs.id, ids))),
  }, { budgetMs: options.budgetMs, batchRows: options.batchRows ?? JOB_OUTPUT_DELETE_BATCH_ROWS, onBatch: options.onBatch });
}
