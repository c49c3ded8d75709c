import { getTableColumns, getTableName, sql, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { Database } from './client';
import type { Logger } from '../logger';
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

export type BatchWriterOptions<Row = unknown> = { flushMs?: number; maxBatch?: number; maxQueued?: number; afterInsert?: AfterInsert; beforeInsert?: BeforeInsert<Row> };

/**
 * One statement for a whole batch with a single parameter: the rows as a JSON array, turned
 * back into rows by Postgres (`json_populate_recordset`, which also converts arrays, jsonb and
 * timestamps). Building a parameter per column per row through the ORM was a tenth of the API's
 * CPU under load; this is one `JSON.stringify`. Keys are the columns' database names, and a
 * column the row leaves out gets its default here, since the record would otherwise hold NULL.
 */
function batchInsert<T extends PgTable>(table: T, afterInsert?: AfterInsert): (rows: Array<T['$inferInsert']>) => SQL {
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
  return (rows) => {
    const records = rows.map((row) => recordOf(row as Record<string, unknown>));
    const insert = sql`insert into ${tableName} (${names}) select ${names} from json_populate_recordset(null::${tableName}, ${JSON.stringify(records)}::json) on conflict do nothing`;
    if (!afterInsert) return insert;
    // Several statements ride as data-modifying CTEs of one statement, the last as its body.
    const after = [afterInsert(sql.raw('"inserted"'))].flat();
    const ctes = after.slice(0, -1).map((statement, i) => sql`, ${sql.raw(`"after_${i}"`)} as (${statement})`);
    return sql`with "inserted" as (${insert} returning *)${sql.join(ctes, sql``)} ${after[after.length - 1]!}`;
  };
}

/** What the log says of a dropped row: its id and organization, never its content. */
function rowIdentity(row: unknown): Record<string, unknown> {
  const { id, orgId } = row as { id?: unknown; orgId?: unknown };
  return { id, org_id: orgId };
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
 * it replaced), and only a row still refused alone is logged and dropped; a batch lost to a
 * connection error is dropped and counted. A request is never held up, and the queue never
 * grows without bound.
 */
export function createBatchWriter<T extends PgTable>(db: Database, table: T, logger: Logger, what: string, options: BatchWriterOptions<T['$inferInsert']> = {}): BatchWriter<T['$inferInsert']> {
  const flushMs = options.flushMs ?? 500;
  const maxBatch = options.maxBatch ?? 200;
  const maxQueued = options.maxQueued ?? 50_000;
  let queue: Array<T['$inferInsert']> = [];
  let inFlight: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | null = null;
  const insert = batchInsert(table, options.afterInsert);
  let dropped = 0;
  let droppedReported = 0;
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
  const writeOneByOne = async (rows: Array<T['$inferInsert']>): Promise<void> => {
    for (const row of rows) {
      const written = await db.execute(insert([row]))
        .catch((err: unknown) => (isDeadlock(err) ? db.execute(insert([row])) : Promise.reject(err)))
        .then(() => true, () => false);
      if (written) continue;
      // Text Postgres cannot store (a NUL, a lone surrogate) in a prompt or an answer is no
      // reason to lose the row and the money in it: once more with that text replaced.
      await db.execute(insert([storableCopy(row) as T['$inferInsert']]))
        .then(() => logger.warn({ row: rowIdentity(row) }, `${what} row written with unstorable characters replaced`))
        .catch((err: unknown) => {
          dropped++;
          logger.error({ err, row: rowIdentity(row) }, `${what} row refused and dropped`);
        });
    }
  };

  const flush = (): Promise<void> => {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    reportDrops();
    const batch = queue;
    queue = [];
    if (batch.length === 0) return inFlight;
    inFlight = inFlight.then(async () => {
      const started = performance.now();
      if (options.beforeInsert) {
        await options.beforeInsert(batch).catch((err: unknown) => logger.error({ err, rows: batch.length }, `${what} preparation failed; rows written as they are`));
      }
      for (let i = 0; i < batch.length; i += maxBatch) {
        const rows = batch.slice(i, i + maxBatch);
        // A deadlock (two writers' hooks upserting the same rows) rolled the whole statement
        // back, so one more try cannot count anything twice.
        const written = await db.execute(insert(rows))
          .catch((err: unknown) => (isDeadlock(err) ? db.execute(insert(rows)) : Promise.reject(err)))
          .then(() => 'written' as const, (err: unknown) => {
            if (isDataError(err)) {
              logger.warn({ err, rows: rows.length }, `${what} batch refused; writing its rows one by one`);
              return 'one by one' as const;
            }
            dropped += rows.length;
            logger.error({ err, rows: rows.length }, `${what} write failed`);
            return 'dropped' as const;
          });
        if (written === 'one by one') await writeOneByOne(rows);
      }
      for (const listener of flushListeners) listener((performance.now() - started) / 1000);
    });
    return inFlight;
  };

  return {
    record(row) {
      if (queue.length >= maxQueued) {
        dropped++;
        timer ??= setTimeout(() => void flush(), flushMs);
        return;
      }
      queue.push(row);
      if (queue.length >= maxBatch) void flush();
      else timer ??= setTimeout(() => void flush(), flushMs);
    },
    flush,
    dropped: () => dropped,
    queued: () => queue.length,
    onFlush(listener) {
      flushListeners.push(listener);
    },
    async close() {
      await flush();
    },
  };
}
