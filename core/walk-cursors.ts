import { eq, sql } from 'drizzle-orm';
import type { Executor } from './db/client';
import { walkCursors } from './db/schema';

/**
 * A page of a scheduled walk's ids, keeping its place (issue 55): `resume` (a run starting the
 * walk) lists after the stored cursor, if a run before it stopped mid-walk; any other page
 * records `afterId` (every id up to it is done) before listing after it.
 */
export type WalkStep = { walk: string; resume: boolean };

export async function walkPage(db: Executor, step: WalkStep | undefined, afterId: string | null, list: (afterId: string | null) => Promise<string[]>): Promise<string[]> {
  if (!step) return list(afterId);
  if (step.resume) {
    const [stored] = await db.select({ afterId: walkCursors.afterId }).from(walkCursors).where(eq(walkCursors.walk, step.walk));
    return list(stored?.afterId ?? afterId);
  }
  if (afterId !== null) {
    await db.insert(walkCursors).values({ walk: step.walk, afterId }).onConflictDoUpdate({ target: walkCursors.walk, set: { afterId, updatedAt: sql`now()` } });
  }
  return list(afterId);
}

/** The walk reached its end: the next run starts from the beginning. */
export async function endWalk(db: Executor, walk: string): Promise<void> {
  await db.delete(walkCursors).where(eq(walkCursors.walk, walk));
}
