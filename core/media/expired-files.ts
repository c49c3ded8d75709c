import { and, asc, eq, gt, inArray, lte, or } from 'drizzle-orm';
import type { Database } from '../db/client';
import { mediaFiles } from '../db/schema';
import type { OutputStorage } from '../storage/output-storage';

/** Files removed per batch: one SELECT, this many storage removals, one DELETE. */
export const MEDIA_DELETE_BATCH_ROWS = 200;

export type MediaFileDeletion = { deleted: number; failed: number; done: boolean };

/**
 * Deletes media files past `expires_at`, oldest first, in batches, until none is left or
 * `budgetMs` has passed (`done` says which). The stored object goes first, then the row: a row
 * left by a crash still points at what to delete, and the link already answers 404 from
 * `expires_at` alone. A file whose removal fails keeps its row and is passed over until the
 * next run, so one stuck object never holds up the rest. `onBatch` is where the activity heartbeats.
 */
export async function deleteExpiredMediaFiles(
  db: Database,
  storage: OutputStorage,
  now: Date,
  options: { budgetMs: number; batchRows?: number; onBatch?: () => void },
): Promise<MediaFileDeletion> {
  const batchRows = options.batchRows ?? MEDIA_DELETE_BATCH_ROWS;
  const deadline = Date.now() + options.budgetMs;
  let after: { expiresAt: Date; id: string } | null = null;
  let deleted = 0;
  let failed = 0;
  for (;;) {
    const expired = lte(mediaFiles.expiresAt, now);
    const rows: Array<{ id: string; storageKey: string; expiresAt: Date }> = await db
      .select({ id: mediaFiles.id, storageKey: mediaFiles.storageKey, expiresAt: mediaFiles.expiresAt })
      .from(mediaFiles)
      .where(after ? and(expired, or(gt(mediaFiles.expiresAt, after.expiresAt), and(eq(mediaFiles.expiresAt, after.expiresAt), gt(mediaFiles.id, after.id)))) : expired)
      .orderBy(asc(mediaFiles.expiresAt), asc(mediaFiles.id))
      .limit(batchRows);
    if (rows.length === 0) return { deleted, failed, done: true };
    const removals = await Promise.allSettled(rows.map((r) => storage.remove(r.storageKey)));
    const removed = rows.filter((_, i) => removals[i]!.status === 'fulfilled').map((r) => r.id);
    if (removed.length > 0) await db.delete(mediaFiles).where(inArray(mediaFiles.id, removed));
    deleted += removed.length;
    failed += rows.length - removed.length;
    const last = rows[rows.length - 1]!;
    after = { expiresAt: last.expiresAt, id: last.id };
    options.onBatch?.();
    if (rows.length < batchRows) return { deleted, failed, done: true };
    if (Date.now() >= deadline) return { deleted, failed, done: false };
  }
}
