import { and, asc, eq, gt, inArray, lte, or } from 'drizzle-orm';
import type { Database } from '../db/client';
import { mediaFiles } from '../db/schema';
import { deleteExpiredObjects, type ExpiredObjectDeletion } from '../storage/expired-objects';
import type { OutputStorage } from '../storage/output-storage';

/** Files removed per batch: one SELECT, this many storage removals, one DELETE. */
export const MEDIA_DELETE_BATCH_ROWS = 200;

export type MediaFileDeletion = ExpiredObjectDeletion;

/**
 * Deletes media files past `expires_at` (core/storage/expired-objects.ts): the stored object,
 * then the row.
 */
export async function deleteExpiredMediaFiles(
  db: Database,
  storage: OutputStorage,
  now: Date,
  options: { budgetMs: number; batchRows?: number; onBatch?: () => void },
): Promise<MediaFileDeletion> {
  return deleteExpiredObjects(storage, {
    page: (after, limit) => {
      const expired = lte(mediaFiles.expiresAt, now);
      return db
        .select({ id: mediaFiles.id, storageKey: mediaFiles.storageKey, expiresAt: mediaFiles.expiresAt })
        .from(mediaFiles)
        .where(after ? and(expired, or(gt(mediaFiles.expiresAt, after.expiresAt), and(eq(mediaFiles.expiresAt, after.expiresAt), gt(mediaFiles.id, after.id)))) : expired)
        .orderBy(asc(mediaFiles.expiresAt), asc(mediaFiles.id))
        .limit(limit);
    },
    forget: async (ids) => void (await db.delete(mediaFiles).where(inArray(mediaFiles.id, ids))),
  }, { budgetMs: options.budgetMs, batchRows: options.batchRows ?? MEDIA_DELETE_BATCH_ROWS, onBatch: options.onBatch });
}
