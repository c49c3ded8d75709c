import { sql } from 'drizzle-orm';
import type { Database } from '../db/client';
import { DEFAULT_PROMPT_RETENTION_DAYS } from '../db/schema';
import { LONGEST_HISTORY_DAYS } from '../observability/history';

/**
 * Retention of the request log (issue 13 section 4), run hourly by the `requestLogRetention`
 * schedule on the maintenance queue:
 * - bodies: `request_body` and `response_body` are set to NULL on rows older than the
 *   organization's `prompt_logging_retention_days`; every other column stays (compressed
 *   retention). The days apply whether prompt logging is on or off now: turning capture off stops
 *   new bodies, the ones already captured expire on the same clock.
 * - partitions: `request_logs` has one partition a UTC day (migration 0015); days ahead are made,
 *   days wholly older than the longest history window (plus slack) are dropped.
 */

const DAY_MS = 86_400_000;
/** Days made ahead of today, so that an outage of the schedule this long still fills day partitions. */
export const REQUEST_LOG_PARTITIONS_AHEAD_DAYS = 7;
/** Days kept past the longest history window before a partition goes, so no read ever misses a row. */
export const REQUEST_LOG_PARTITION_SLACK_DAYS = 2;
/** Rows cleared per UPDATE: short transactions, bounded WAL per statement. */
export const BODY_CLEAR_BATCH_ROWS = 2_000;
/** Partition DDL waits at most this long for its lock, never queueing inserts behind it for longer. */
const PARTITION_LOCK_TIMEOUT = '5s';
/** Serializes partition maintenance across workers (any constant; distinct from the migration lock). */
const PARTITION_LOCK_ID = 7_233_015;

const PARTITION_NAME = /^request_logs_p(\d{4})(\d{2})(\d{2})$/;

/** `request_logs_p20261122` for the UTC day that starts at `day`. */
export function partitionName(day: Date): string {
  return `request_logs_p${day.toISOString().slice(0, 10).replaceAll('-', '')}`;
}

function startOfUtcDay(at: Date): Date {
  return new Date(Math.floor(at.getTime() / DAY_MS) * DAY_MS);
}

/** The first instant a partition must still hold: older days go. */
export function partitionDropCutoff(now: Date): Date {
  return new Date(startOfUtcDay(now).getTime() - (LONGEST_HISTORY_DAYS + REQUEST_LOG_PARTITION_SLACK_DAYS) * DAY_MS);
}

export type PartitionChanges = { created: string[]; dropped: string[]; movedFromDefault: number; deletedFromDefault: number };

async function existingPartitions(db: Pick<Database, 'execute'>): Promise<Set<string>> {
  const { rows } = await db.execute<{ name: string }>(sql`
    select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'request_logs'::regclass`);
  return new Set(rows.map((r) => r.name));
}

/**
 * Makes the day partitions from today to REQUEST_LOG_PARTITIONS_AHEAD_DAYS ahead and drops those
 * wholly older than the drop cutoff. Idempotent; each change is its own short transaction under
 * an advisory lock and a lock timeout. Rows that reached the default partition (the schedule was
 * down past the days made ahead) are moved into the day's new partition.
 */
export async function maintainPartitions(db: Database, now: Date): Promise<PartitionChanges> {
  const changes: PartitionChanges = { created: [], dropped: [], movedFromDefault: 0, deletedFromDefault: 0 };
  const existing = await existingPartitions(db);
  const today = startOfUtcDay(now);
  for (let i = 0; i <= REQUEST_LOG_PARTITIONS_AHEAD_DAYS; i++) {
    const from = new Date(today.getTime() + i * DAY_MS);
    const to = new Date(from.getTime() + DAY_MS);
    const name = partitionName(from);
    if (existing.has(name)) continue;
    const moved = await db.transaction(async (tx) => {
      await tx.execute(sql`select set_config('lock_timeout', ${PARTITION_LOCK_TIMEOUT}, true), pg_advisory_xact_lock(${PARTITION_LOCK_ID})`);
      if ((await existingPartitions(tx)).has(name)) return null;
      const table = sql.identifier(name);
      const bounds = sql`for values from (${sql.raw(`'${from.toISOString()}'`)}) to (${sql.raw(`'${to.toISOString()}'`)})`;
      const { rows } = await tx.execute<{ any: boolean }>(sql`select exists (select 1 from request_logs_default where created_at >= ${from.toISOString()} and created_at < ${to.toISOString()}) as any`);
      if (!rows[0]?.any) {
        await tx.execute(sql`create table ${table} partition of request_logs ${bounds}`);
        return 0;
      }
      // Creating the partition over rows the default holds would fail: move them, then attach.
      await tx.execute(sql`create table ${table} (like request_logs including defaults including constraints)`);
      const result = await tx.execute(sql`
        with moved as (delete from request_logs_default where created_at >= ${from.toISOString()} and created_at < ${to.toISOString()} returning *)
        insert into ${table} select * from moved`);
      await tx.execute(sql`alter table request_logs attach partition ${table} ${bounds}`);
      return result.rowCount ?? 0;
    });
    if (moved === null) continue;
    changes.created.push(name);
    changes.movedFromDefault += moved;
  }

  const cutoff = partitionDropCutoff(now);
  for (const name of [...existing].sort()) {
    const m = PARTITION_NAME.exec(name);
    if (!m) continue;
    const ends = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) + DAY_MS;
    if (ends > cutoff.getTime()) continue;
    await db.transaction(async (tx) => {
      await tx.execute(sql`select set_config('lock_timeout', ${PARTITION_LOCK_TIMEOUT}, true), pg_advisory_xact_lock(${PARTITION_LOCK_ID})`);
      await tx.execute(sql`drop table if exists ${sql.identifier(name)}`);
    });
    changes.dropped.push(name);
  }
  const deleted = await db.execute(sql`delete from request_logs_default where created_at < ${cutoff.toISOString()}`);
  changes.deletedFromDefault = deleted.rowCount ?? 0;
  return changes;
}

export type BodyClearing = { cleared: number; done: boolean; afterOrgId: string | null };

/**
 * Clears expired bodies organization by organization (in id order, only those that have any),
 * BODY_CLEAR_BATCH_ROWS rows an UPDATE, until done or `budgetMs` has passed; the answer says
 * where to go on. `onBatch` is called after every batch (the activity heartbeats there).
 */
export async function clearExpiredBodies(
  db: Database,
  now: Date,
  options: { afterOrgId: string | null; budgetMs: number; batchRows?: number; onBatch?: () => void },
): Promise<BodyClearing> {
  const batchRows = options.batchRows ?? BODY_CLEAR_BATCH_ROWS;
  const deadline = Date.now() + options.budgetMs;
  let after = options.afterOrgId;
  let cleared = 0;
  for (;;) {
    // Only organizations holding an expired body: one probe each of the bodies-only index.
    const { rows: orgs } = await db.execute<{ id: string; days: number }>(sql`
      select o.id, coalesce(s.prompt_logging_retention_days, ${DEFAULT_PROMPT_RETENTION_DAYS})::int as days
      from organizations o left join org_settings s on s.id = o.id
      where (${after}::text is null or o.id > ${after})
        and exists (
          select 1 from request_logs r
          where r.org_id = o.id
            and r.created_at < ${now.toISOString()}::timestamptz - make_interval(days => coalesce(s.prompt_logging_retention_days, ${DEFAULT_PROMPT_RETENTION_DAYS}))
            and (r.request_body is not null or r.response_body is not null))
      order by o.id
      limit 100`);
    if (orgs.length === 0) return { cleared, done: true, afterOrgId: null };
    for (const org of orgs) {
      const before = new Date(now.getTime() - org.days * DAY_MS).toISOString();
      for (;;) {
        const result = await db.execute(sql`
          update request_logs r set request_body = null, response_body = null
          from (
            select id, created_at from request_logs
            where org_id = ${org.id} and created_at < ${before}
              and (request_body is not null or response_body is not null)
            order by created_at
            limit ${batchRows}
          ) expired
          where r.org_id = ${org.id} and r.id = expired.id and r.created_at = expired.created_at`);
        const n = result.rowCount ?? 0;
        cleared += n;
        options.onBatch?.();
        if (n < batchRows) break;
        // Out of time within an organization: the next call starts again at it.
        if (Date.now() >= deadline) return { cleared, done: false, afterOrgId: after };
      }
      after = org.id;
      if (Date.now() >= deadline) return { cleared, done: false, afterOrgId: after };
    }
  }
}
