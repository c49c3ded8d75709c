import type { OutputStorage } from './output-storage';

/** A stored object whose link has expired: its row's id, where it is stored (null: nothing is), and since when it is expired. */
export type ExpiredObject = { id: string; storageKey: string | null; expiresAt: Date };

/** Where expired objects are listed (oldest first, after a position) and their rows let go of them. */
export type ExpiredObjectSource = {
  page(after: { expiresAt: Date; id: string } | null, limit: number): Promise<ExpiredObject[]>;
  forget(ids: string[]): Promise<void>;
};

export type ExpiredObjectDeletion = { deleted: number; failed: number; done: boolean };

/**
 * Deletes objects past their expiry, oldest first, in batches, until none is left or `budgetMs`
 * has passed (`done` says which). The stored object goes first, then the row lets go of it: a
 * row left by a crash still points at what to delete, and the link already answers 404 from
 * the expiry alone. An object whose removal fails keeps its row and is passed over until the
 * next run, so one stuck object never holds up the rest. `onBatch` is where an activity heartbeats.
 */
export async function deleteExpiredObjects(
  storage: OutputStorage,
  source: ExpiredObjectSource,
  options: { budgetMs: number; batchRows: number; onBatch?: () => void },
): Promise<ExpiredObjectDeletion> {
  const deadline = Date.now() + options.budgetMs;
  let after: { expiresAt: Date; id: string } | null = null;
  let deleted = 0;
  let failed = 0;
  for (;;) {
    const rows = await source.page(after, options.batchRows);
    if (rows.length === 0) return { deleted, failed, done: true };
    const removals = await Promise.allSettled(rows.map(async (r) => (r.storageKey === null ? undefined : storage.remove(r.storageKey))));
    const removed = rows.filter((_, i) => removals[i]!.status === 'fulfilled').map((r) => r.id);
    if (removed.length > 0) await source.forget(removed);
    deleted += removed.length;
    failed += rows.length - removed.length;
    const last = rows[rows.length - 1]!;
    after = { expiresAt: last.expiresAt, id: last.id };
    options.onBatch?.();
    if (rows.length < options.batchRows) return { deleted, failed, done: true };
    if (Date.now() >= deadline) return { deleted, failed, done: false };
  }
}
