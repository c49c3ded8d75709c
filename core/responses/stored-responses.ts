import { and, eq, sql } from 'drizzle-orm';
import type { KeyReach } from '../auth/key-reach';
import type { Database } from '../db/client';
import { DEFAULT_PROMPT_RETENTION_DAYS, orgSettings, storedResponses } from '../db/schema';

/**
 * Kept Responses (issue 35): written when a response with `store: true` completes, read for
 * `previous_response_id` and `GET /v1/responses/{id}`. A row is visible only within its
 * organization's prompt retention (the same days the request log keeps prompts for, read now,
 * not when it was written) and only to keys whose reach covers the key that made it
 * (core/auth/key-reach.ts: its own lineage, or the organization for `observability_access:
 * organization`); anything else reads as not found, never as someone else's.
 */

/** Rows deleted per statement by the retention run. */
export const STORED_RESPONSE_DELETE_BATCH = 2_000;

export type StoredResponse = { id: string; input: Array<Record<string, unknown>>; response: Record<string, unknown>; createdAt: Date };

export type KeepResponse = { id: string; orgId: string; keyId: string; lineageId: string; input: Array<Record<string, unknown>>; response: Record<string, unknown> };

export async function keepResponse(db: Database, row: KeepResponse): Promise<void> {
  await db.insert(storedResponses).values(row);
}

const retentionDays = sql<number>`coalesce(${orgSettings.promptLoggingRetentionDays}, ${DEFAULT_PROMPT_RETENTION_DAYS})`;

/** The oldest `created_at` still inside the organization's retention at `now` (with org_settings joined). */
const retentionCutoff = (now: Date) => sql`${now.toISOString()}::timestamptz - make_interval(days => ${retentionDays})`;

/** A kept response the reach covers, inside its retention; null otherwise. */
export async function findStoredResponse(db: Database, reach: KeyReach, id: string, now: Date): Promise<StoredResponse | null> {
  const [row] = await db.select({ id: storedResponses.id, input: storedResponses.input, response: storedResponses.response, createdAt: storedResponses.createdAt })
    .from(storedResponses)
    .leftJoin(orgSettings, eq(orgSettings.id, storedResponses.orgId))
    .where(and(
      eq(storedResponses.id, id),
      eq(storedResponses.orgId, reach.orgId),
      reach.lineageId === null ? undefined : eq(storedResponses.lineageId, reach.lineageId),
      sql`${storedResponses.createdAt} > ${retentionCutoff(now)}`,
    ));
  return row ?? null;
}

/** Deletes a kept response the reach covers; whether there was one. */
export async function deleteStoredResponse(db: Database, reach: KeyReach, id: string): Promise<boolean> {
  const deleted = await db.delete(storedResponses).where(and(
    eq(storedResponses.id, id),
    eq(storedResponses.orgId, reach.orgId),
    reach.lineageId === null ? undefined : eq(storedResponses.lineageId, reach.lineageId),
  )).returning({ id: storedResponses.id });
  return deleted.length > 0;
}

/**
 * Deletes kept responses past their organization's retention, a batch a statement, until none
 * is left or `budgetMs` has passed; answers how many and whether it finished.
 */
export async function deleteExpiredStoredResponses(db: Database, now: Date, options: { budgetMs: number; batchRows?: number; onBatch?: () => void }): Promise<{ deleted: number; done: boolean }> {
  const batch = options.batchRows ?? STORED_RESPONSE_DELETE_BATCH;
  const started = Date.now();
  let deleted = 0;
  for (;;) {
    const { rowCount } = await db.execute(sql`
      delete from ${storedResponses} where ${storedResponses.id} in (
        select ${storedResponses.id} from ${storedResponses} left join ${orgSettings} on ${orgSettings.id} = ${storedResponses.orgId}
        where ${storedResponses.createdAt} <= ${retentionCutoff(now)}
        limit ${batch})`);
    deleted += rowCount ?? 0;
    options.onBatch?.();
    if ((rowCount ?? 0) < batch) return { deleted, done: true };
    if (Date.now() - started > options.budgetMs) return { deleted, done: false };
  }
}
