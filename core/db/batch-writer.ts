import { getTableColumns, getTableName, sql, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { Database } from './client';
import type { Logger } from '../logger';
import type { PendingRowJournal, RowJournal } from './row-journal';
import { storableCopy } from './storable-text';

export type BatchWriter<Row> = {
  /** Queues a row; never waits on Postgres. */
  record(row: Row): void;
  /** Rows given up so far: past the queue's bound, or in a batch Postgres refused. */
  dropped(): number;
  /** Rows waiting for their batch now. */
  queued(): number;
  /** Told of each batch as it ends (written, written row by row, or given up): how long it took, in seconds. */
  onFlush(listener: (seconds: number) => void): void;
  flush(): Promise<void>;
  /**
   * A row owed if this process dies before the closer it answers is called (a call in flight
   * that nothing else records): kept in the pending journal, never queued. Without one, nothing.
   */
  pending(row: Row): () => void;
  /** With a journal: inserts the rows dead processes left in it; answers how many segments it took. */
  recover(): Promise<number>;
  close(): Promise<void>;
};

/**
 * A statement that runs with each batch insert, in the same statement: it reads the rows the
 * insert actually took (replays skipped by `on conflict do nothing` are not in it) from the CTE
 * named by `inserted`, which has every column of the table under its database name. Since it is
 * one statement, a batch Postgres refuses takes neither the rows nor what the hook does with them.
 */
export type AfterInsert = (inserted: SQL) => SQL | SQL[];

/**
 * Work on a batch before it is inserted (cost attribution fills in columns). It runs in the
 * flush, never on the path of `record`; when it fails the rows are inserted as they are.
 */
export type BeforeInsert<Row> = (rows: Row[]) => Promise<void>;

/**
 * With a `beforeInsert`: does its work on one row at once when it can without waiting (cost
 * attribution with the organization's rules at hand), and says whether it did. A row it did is
 * written out as it is recorded; the others wait for `beforeInsert` in the flush.
 */
export type PrepareNow<Row> = (row: Row) => boolean;

/**
 * Where batches wait their turn: one insert at a time through a lane. The writers of one
 * process share one, so their inserts never keep more than one Postgres backend busy at once.
 * On the two-core machine two writers' batches landing together took both cores from the
 * requests under way (bench/results/2026-11-27-issue-37-stalls.md).
 */
export type FlushLane = { run(work: () => Promise<void>): Promise<void> };

export function createFlushLane(): FlushLane {
  let tail: Promise<void> = Promise.resolve();
  return {
    run(work) {
      const turn = tail.then(work);
      // A failed batch ends its own turn; the next one still runs.
      tail = turn.catch(() => undefined);
      return turn;
    },
  };
}

/**
 * Rows that start a batch before `flushMs` is up. Postgres spends about 40 µs a row here (the
 * request log's indexes, the rollups); at 200 rows a batch it held a core for 8 ms at a time,
 * long enough for the scheduler to make the requests in flight wait their turn (one in ~200
 * was 5-10 ms late at c=1). At 50 a batch holds it about 2 ms. Under more load than batches
 * of 50 keep up with, a batch takes all that queued meanwhile (see `drain`).
 */
export const BATCH_ROWS = 50;
/** Rows one statement takes at most; a larger batch is several statements. */
export const MAX_STATEMENT_ROWS = 500;
/**
 * A batch Postgres could not take for a reason other than its rows (the connection refused or
 * lost: a restart, a failover) waits and is tried again, first after this long, then twice as
 * long each time up to `MAX_RETRY_MS`. Its rows are money and the request log: dropped, a
 * Postgres restart lost every settle of its seconds (issue 54's soak).
 */
export const RETRY_MS = 500;
export const MAX_RETRY_MS = 5_000;
/** How long `close()` keeps trying a batch Postgres cannot take before it gives the rows up. */
export const CLOSE_RETRY_MS = 15_000;

export type BatchWriterOptions<Row = unknown> = {
  flushMs?: number; maxBatch?: number; maxStatementRows?: number; maxQueued?: number; afterInsert?: AfterInsert; beforeInsert?: BeforeInsert<Row>; prepareNow?: PrepareNow<Row>;
  /** The first wait before a batch Postgres could not take is tried again (RETRY_MS). */
  retryMs?: number;
  /** How long `close()` keeps trying (CLOSE_RETRY_MS). */
  closeRetryMs?: number;
  /** Rows kept on local disk until Postgres has them, so a killed process loses none (core/db/row-journal.ts). */
  journal?: RowJournal;
  /** Rows owed if the process dies first (`pending`), inserted by recovery after the journal's. */
  pendingJournal?: PendingRowJournal;
  /** Shared with the process's other writers (the API's); without one, the writer's own. */
  lane?: FlushLane;
};

/** A row as Postgres reads it: the JSON text of its record (keys the columns' database names). */
type RecordText = string & { readonly __record: unique symbol };

type BatchInsert<Row> = {
  /** A row's record as JSON text, its defaults filled in now. */
  text(row: Row): RecordText;
  /** One statement inserting these records. */
  statement(records: RecordText[]): SQL;
};

/**
 * One statement for a whole batch with a single parameter: the rows as a JSON array, turned
 * back into rows by Postgres (`json_populate_recordset`, which also converts arrays, jsonb and
 * timestamps). Building a parameter per column per row through the ORM was a tenth of the API's
 * CPU under load; this is one `JSON.stringify` a row. Keys are the columns' database names, and
 * a column the row leaves out gets its default here, since the record would otherwise hold NULL.
 */
export function batchInsert<T extends PgTable>(table: T, afterInsert?: AfterInsert): BatchInsert<T['$inferInsert']> {
  const columns = Object.entries(getTableColumns(table)) as Array<[string, PgColumn]>;
  const names = sql.raw(columns.map(([, c]) => `"${c.name}"`).join(', '));
  const tableName = sql.raw(`"${getTableName(table)}"`);
  const valueOf = (column: PgColumn, value: unknown): unknown => {
    if (value === undefined) {
      if (column.defaultFn) value = column.defaultFn();
      else if (column.hasDefault && column.default !== undefined && !(column.default instanceof Object && 'queryChunks' in column.default)) value = column.default;
      else if (column.hasDefault && column.columnType === 'PgTimestamp') value = new Date();
      else return null;
    }
    if (value instanceof Date) return value.toISOString();
    return value;
  };
  // A record is filled column by column in one order, so every record shares one hidden class
  // (Object.fromEntries made a dictionary per row: twice the time, and a slower stringify).
  const recordOf = (row: Record<string, unknown>): Record<string, unknown> => {
    const record: Record<string, unknown> = {};
    for (const [key, column] of columns) record[column.name] = valueOf(column, row[key]);
    return record;
  };
  return {
    text: (row) => JSON.stringify(recordOf(row as Record<string, unknown>)) as RecordText,
    statement(records) {
      const insert = sql`insert into ${tableName} (${names}) select ${names} from json_populate_recordset(null::${tableName}, ${`[${records.join(',')}]`}::json) on conflict do nothing`;
      if (!afterInsert) return insert;
      // Several statements ride as data-modifying CTEs of one statement, the last as its body.
      const after = [afterInsert(sql.raw('"inserted"'))].flat();
      const ctes = after.slice(0, -1).map((statement, i) => sql`, ${sql.raw(`"after_${i}"`)} as (${statement})`);
      return sql`with "inserted" as (${insert} returning *)${sql.join(ctes, sql``)} ${after[after.length - 1]!}`;
    },
  };
}

/** What the log says of a dropped row: its id and organization, never its content. */
function rowIdentity(record: RecordText): Record<string, unknown> {
  const { id, org_id } = JSON.parse(record) as { id?: unknown; org_id?: unknown };
  return { id, org_id };
}

/** The SQLSTATE of a Postgres error, as node-postgres reports it (drizzle may wrap it in `cause`). */
function sqlStateOf(err: unknown): string | null {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 3; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string') return e.code;
  }
  return null;
}

/**
 * Whether Postgres refused the rows themselves (SQLSTATE class 22, data exception, or 23,
 * integrity constraint): then one row may be at fault and the others can be written. A
 * connection refused or lost is no reason to try each row.
 */
const isDataError = (err: unknown) => /^2[23]/.test(sqlStateOf(err) ?? '');

/** A deadlock (40P01): two writers' hooks upserting the same rows. */
const isDeadlock = (err: unknown) => sqlStateOf(err) === '40P01';

/**
 * Rows written off the hot path: they queue in memory and go to Postgres in one multi-row
 * insert every `flushMs` or every `maxBatch` rows, whichever comes first. A batch Postgres
 * refuses for its data is written again row by row (a row with text Postgres cannot store gets
 * it replaced), and only a row still refused alone is logged and dropped. A batch lost to a
 * connection error goes back to the head of the queue and is tried again after a backoff
 * (`RETRY_MS`), so a Postgres restart delays rows rather than losing them; what the queue's
 * bound cannot hold meanwhile is dropped and counted. A request is never held up, and the
 * queue never grows without bound.
 *
 * A row waits as the JSON text of its record, written when it is recorded (once its
 * `beforeInsert` work is done, see `prepareNow`). Turning 200 row objects into text at each
 * flush held the event loop for 2-4 ms at a time, and the rows, alive across young-generation
 * collections while they waited, were copied and promoted by them: one request in ~200 met a
 * stall of 5-15 ms at c=1 (bench/results/2026-11-27-issue-37-stalls.md). A text is one flat
 * object to the collector.
 */
export function createBatchWriter<T extends PgTable>(db: Database, table: T, logger: Logger, what: string, options: BatchWriterOptions<T['$inferInsert']> = {}): BatchWriter<T['$inferInsert']> {
  const flushMs = options.flushMs ?? 500;
  const maxBatch = options.maxBatch ?? BATCH_ROWS;
  const maxStatementRows = options.maxStatementRows ?? MAX_STATEMENT_ROWS;
  const lane = options.lane ?? createFlushLane();
  const maxQueued = options.maxQueued ?? 50_000;
  /** Rows written out as they were recorded, and rows still waiting for `beforeInsert`. */
  let queue: RecordText[] = [];
  let unprepared: Array<T['$inferInsert']> = [];
  const queued = () => queue.length + unprepared.length;
  const { beforeInsert, prepareNow } = options;
  let timer: NodeJS.Timeout | null = null;
  const insert = batchInsert(table, options.afterInsert);
  let dropped = 0;
  let droppedReported = 0;
  /** Rows of batches Postgres could not take, in order, to go back to the queue's head. */
  let unwritten: RecordText[] = [];
  const retryMs = options.retryMs ?? RETRY_MS;
  let backoffMs = retryMs;
  let retryTimer: NodeJS.Timeout | null = null;
  const { journal, pendingJournal } = options;
  const NO_CLOSE = () => undefined;
  const flushListeners: Array<(seconds: number) => void> = [];
  /** Drops are counted, and said in the log once a flush (not once a row). */
  const reportDrops = () => {
    if (dropped === droppedReported) return;
    logger.warn({ dropped: dropped - droppedReported, total_dropped: dropped }, `${what} rows dropped`);
    droppedReported = dropped;
  };

  /**
   * After Postgres refused a batch: each row on its own, so one bad row (text Postgres cannot
   * store, say) costs only itself and never the other rows, which may be other organizations'.
   */
  const writeOneByOne = async (rows: RecordText[]): Promise<void> => {
    for (const row of rows) {
      const written = await db.execute(insert.statement([row]))
        .catch((err: unknown) => (isDeadlock(err) ? db.execute(insert.statement([row])) : Promise.reject(err)))
        .then(() => true, () => false);
      if (written) continue;
      // Text Postgres cannot store (a NUL, a lone surrogate) in a prompt or an answer is no
      // reason to lose the row and the money in it: once more with that text replaced.
      await db.execute(insert.statement([JSON.stringify(storableCopy(JSON.parse(row))) as RecordText]))
        .then(() => logger.warn({ row: rowIdentity(row) }, `${what} row written with unstorable characters replaced`))
        .catch((err: unknown) => {
          dropped++;
          logger.error({ err, row: rowIdentity(row) }, `${what} row refused and dropped`);
        });
    }
  };

  /** One batch: what is queued now, prepared if need be, in statements of at most `maxStatementRows`. */
  const writeBatch = async (batch: RecordText[], toPrepare: Array<T['$inferInsert']>): Promise<void> => {
    const started = performance.now();
    if (toPrepare.length > 0) {
      await options.beforeInsert?.(toPrepare).catch((err: unknown) => logger.error({ err, rows: toPrepare.length }, `${what} preparation failed; rows written as they are`));
      for (const row of toPrepare) batch.push(insert.text(row));
    }
    for (let i = 0; i < batch.length; i += maxStatementRows) {
      const rows = batch.slice(i, i + maxStatementRows);
      // A deadlock (two writers' hooks upserting the same rows) rolled the whole statement
      // back, so one more try cannot count anything twice.
      const written = await db.execute(insert.statement(rows))
        .catch((err: unknown) => (isDeadlock(err) ? db.execute(insert.statement(rows)) : Promise.reject(err)))
        .then(() => 'written' as const, (err: unknown) => {
          if (isDataError(err)) {
            logger.warn({ err, rows: rows.length }, `${what} batch refused; writing its rows one by one`);
            return 'one by one' as const;
          }
          unwritten.push(...rows);
          logger.error({ err, rows: rows.length, retry_in_ms: backoffMs }, `${what} write failed; the rows wait and are tried again`);
          return 'unwritten' as const;
        });
      if (written === 'one by one') await writeOneByOne(rows);
    }
    for (const listener of flushListeners) listener((performance.now() - started) / 1000);
  };

  /**
   * One batch at a time, each taking all that queued while the one before it was written
   * (group commit), once `maxBatch` rows wait or a flush asks for all: under light load batches
   * stay small and Postgres busy briefly; when inserts fall behind, batches grow and the rows
   * queue within `maxQueued`. (A chain of fixed-size batches fell behind at c=32 and grew the
   * process by 10 MB a second.) A few rows left after a batch wait for the timer or for
   * `maxBatch` rows rather than make a transaction of their own.
   */
  let draining: Promise<void> | null = null;
  /** A flush (the timer, `flush()`, `close()`) wants every row written, not only full batches. */
  let all = false;
  const drain = async (): Promise<void> => {
    while (queued() > 0 && (all || queued() >= maxBatch)) {
      // Every row queued now is in the journal's segments up to this one.
      const journaled = journal?.cut();
      const batch = queue;
      const toPrepare = unprepared;
      queue = [];
      unprepared = [];
      // Through the lane, one at a time with the process's other writers' batches.
      await lane.run(() => writeBatch(batch, toPrepare));
      if (unwritten.length > 0) {
        requeueUnwritten();
        return;
      }
      backoffMs = retryMs;
      if (journaled !== undefined) journal!.release(journaled);
    }
    if (queued() === 0) all = false;
  };
  /**
   * Rows Postgres could not take go back to the head of the queue, ahead of what was recorded
   * since, and a retry is set after the backoff; past the queue's bound the newest are dropped.
   */
  const requeueUnwritten = () => {
    queue = unwritten.concat(queue);
    unwritten = [];
    const over = queued() - maxQueued;
    if (over > 0) {
      queue.length -= Math.min(over, queue.length);
      dropped += over;
    }
    retryTimer ??= setTimeout(() => {
      retryTimer = null;
      void flush();
    }, backoffMs);
    retryTimer.unref?.();
    backoffMs = Math.min(backoffMs * 2, MAX_RETRY_MS);
  };
  const startDrain = (): Promise<void> => (draining ??= drain().finally(() => (draining = null)));

  /**
   * Answers once every row recorded before the call, and any recorded while it ran, is written,
   * given up, or back in the queue after Postgres could not be reached (tried again on a timer;
   * `close()` waits for those).
   */
  const flush = (): Promise<void> => {
    if (retryTimer) {
      clearTimeout(retryTimer);
      retryTimer = null;
    }
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    reportDrops();
    all = true;
    return startDrain();
  };

  return {
    record(row) {
      if (queued() >= maxQueued) {
        dropped++;
        timer ??= setTimeout(() => void flush(), flushMs);
        return;
      }
      try {
        if (!beforeInsert || prepareNow?.(row)) {
          const text = insert.text(row);
          queue.push(text);
          journal?.append(text);
        } else {
          unprepared.push(row);
          // Kept as it is now: a row recovered from the journal goes in without its preparation.
          journal?.append(insert.text(row));
        }
      } catch (err) {
        // A row JSON cannot hold (a BigInt, a cycle) is the caller's bug: never the request's failure.
        dropped++;
        logger.error({ err, row: { id: (row as { id?: unknown }).id } }, `${what} row could not be written out; dropped`);
        return;
      }
      // While a batch is being written, the next takes this row once `maxBatch` wait; the timer
      // writes what is left of a batch that never fills.
      if (queued() >= maxBatch) void startDrain();
      else timer ??= setTimeout(() => void flush(), flushMs);
    },
    flush,
    pending(row) {
      if (!pendingJournal) return NO_CLOSE;
      const text = insert.text(row);
      return pendingJournal.open(String((row as { id?: unknown }).id ?? ''), text);
    },
    async recover() {
      // The journal's rows first: a row settled and journaled wins over its pending worst case (same id).
      const orphans = [...(journal?.orphans() ?? []), ...(pendingJournal?.orphans() ?? [])];
      let taken = 0;
      for (const orphan of orphans) {
        try {
          for (let i = 0; i < orphan.records.length; i += maxStatementRows) {
            const rows = orphan.records.slice(i, i + maxStatementRows) as RecordText[];
            await lane.run(() => db.execute(insert.statement(rows)).then(() => undefined));
          }
          orphan.remove();
          taken += 1;
          logger.info({ rows: orphan.records.length, file: orphan.file }, `${what} rows a stopped process left recovered`);
        } catch (err) {
          // Tried again at the next recovery; the inserts take each row once.
          logger.warn({ err, file: orphan.file }, `${what} rows a stopped process left could not be written yet`);
        }
      }
      return taken;
    },
    dropped: () => dropped,
    queued,
    onFlush(listener) {
      flushListeners.push(listener);
    },
    /** Writes what is queued; a batch Postgres cannot take is tried for `CLOSE_RETRY_MS`, then given up and counted. */
    async close() {
      const giveUpAt = Date.now() + (options.closeRetryMs ?? CLOSE_RETRY_MS);
      await flush();
      while (queued() > 0 && Date.now() < giveUpAt) {
        await new Promise((r) => setTimeout(r, Math.min(backoffMs, Math.max(0, giveUpAt - Date.now()))));
        await flush();
      }
      if (retryTimer) clearTimeout(retryTimer);
      retryTimer = null;
      // Rows Postgres did not take stay in the journal, for the next process to insert.
      journal?.close(queued() === 0);
      pendingJournal?.close();
      if (queued() > 0) {
        dropped += queued();
        logger.error({ rows: queued(), kept_in_journal: journal !== undefined }, `${what} rows given up at close: Postgres did not take them`);
        queue = [];
        unprepared = [];
        reportDrops();
      }
    },
  };
}
