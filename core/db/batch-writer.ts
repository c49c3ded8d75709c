import type { PgTable } from 'drizzle-orm/pg-core';
import type { Database } from './client';
import type { Logger } from '../logger';

export type BatchWriter<Row> = {
  /** Queues a row; never waits on Postgres. */
  record(row: Row): void;
  flush(): Promise<void>;
  close(): Promise<void>;
};

export type BatchWriterOptions = { flushMs?: number; maxBatch?: number; maxQueued?: number };

/**
 * Rows written off the hot path: they queue in memory and go to Postgres in one multi-row
 * insert every `flushMs` or every `maxBatch` rows, whichever comes first. A failed insert is
 * logged and dropped: a request is never held up, and the queue never grows without bound.
 */
export function createBatchWriter<T extends PgTable>(db: Database, table: T, logger: Logger, what: string, options: BatchWriterOptions = {}): BatchWriter<T['$inferInsert']> {
  const flushMs = options.flushMs ?? 500;
  const maxBatch = options.maxBatch ?? 200;
  const maxQueued = options.maxQueued ?? 50_000;
  let queue: Array<T['$inferInsert']> = [];
  let inFlight: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | null = null;

  const flush = (): Promise<void> => {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    const batch = queue;
    queue = [];
    if (batch.length === 0) return inFlight;
    inFlight = inFlight.then(async () => {
      for (let i = 0; i < batch.length; i += maxBatch) {
        await db.insert(table).values(batch.slice(i, i + maxBatch)).onConflictDoNothing()
          .catch((err: unknown) => logger.error({ err, rows: batch.length }, `${what} write failed`));
      }
    });
    return inFlight;
  };

  return {
    record(row) {
      if (queue.length >= maxQueued) return;
      queue.push(row);
      if (queue.length >= maxBatch) void flush();
      else timer ??= setTimeout(() => void flush(), flushMs);
    },
    flush,
    async close() {
      await flush();
    },
  };
}
