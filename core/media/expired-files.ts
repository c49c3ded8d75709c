import { and, asc, eq, gt, inArray, lte, notExists, notInArray, or, sql, type SQL } from 'drizzle-orm';
import type { Database } from '../db/client';
import { batches, files, mediaFiles, TERMINAL_BATCH_STATUSES } from '../db/schema';
import { deleteExpiredObjects, type ExpiredObjectDeletion, type ExpiredObjectSource } from '../storage/expired-objects';
import type { OutputStorage } from '../storage/output-storage';

/** Files removed per batch: one SELECT, this many storage removals, one DELETE. */
export const MEDIA_DELETE_BATCH_ROWS = 200;

export type MediaFileDeletion = ExpiredObjectDeletion;

/** A table of stored files: each row's object is deleted, then the row, once `expires_at` has passed. */
type StoredFileTable = typeof mediaFiles | typeof files;

function expiredRows(db: Database, table: StoredFileTable, now: Date, keep?: SQL): ExpiredObjectSource {
  return {
    page: async (after, limit) => {
      const expired = and(lte(table.expiresAt, now), keep)!;
      const rows = await db
        .select({ id: table.id, storageKey: table.storageKey, expiresAt: table.expiresAt })
        .from(table)
        .where(after ? and(expired, or(gt(table.expiresAt, after.expiresAt), and(eq(table.expiresAt, after.expiresAt), gt(table.id, after.id)))) : expired)
        .orderBy(asc(table.expiresAt), asc(table.id))
        .limit(limit);
      // `lte` leaves out a file kept without an expiry: every row here has one.
      return rows.map((r) => ({ ...r, expiresAt: r.expiresAt! }));
    },
    forget: async (ids) => void (await db.delete(table).where(inArray(table.id, ids))),
  };
}

/**
 * Deletes stored files past `expires_at` (core/storage/expired-objects.ts), the object then the
 * row: the media endpoints' outputs, then batch inputs and outputs (issue 56), each within what
 * is left of the budget.
 */
export async function deleteExpiredMediaFiles(
  db: Database,
  storage: OutputStorage,
  now: Date,
  options: { budgetMs: number; batchRows?: number; onBatch?: () => void },
): Promise<MediaFileDeletion> {
  const started = Date.now();
  const settings = { batchRows: options.batchRows ?? MEDIA_DELETE_BATCH_ROWS, onBatch: options.onBatch };
  const media = await deleteExpiredObjects(storage, expiredRows(db, mediaFiles, now), { ...settings, budgetMs: options.budgetMs });
  if (!media.done) return media;
  // A batch still running keeps its input past the retention: it reads it until it ends.
  const unusedByRunningBatch = notExists(db.select({ one: sql`1` }).from(batches).where(and(eq(batches.inputFileId, files.id), notInArray(batches.status, [...TERMINAL_BATCH_STATUSES]))));
  const batchFiles = await deleteExpiredObjects(storage, expiredRows(db, files, now, unusedByRunningBatch), { ...settings, budgetMs: Math.max(0, options.budgetMs - (Date.now() - started)) });
  return { deleted: media.deleted + batchFiles.deleted, failed: media.failed + batchFiles.failed, done: batchFiles.done };
}
