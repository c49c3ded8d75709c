import type { Database } from '../db/client';
import { requestLogs } from '../db/schema';
import type { Logger } from '../logger';

export type RequestLogEntry = typeof requestLogs.$inferInsert;

export type RequestLogWriter = {
  /** Queues a row; never waits on Postgres. */
  record(entry: RequestLogEntry): void;
  flush(): Promise<void>;
  close(): Promise<void>;
};

/**
 * Request-log rows leave the hot path: they queue in memory and go to Postgres in one
 * multi-row insert every `flushMs` or every `maxBatch` rows, whichever comes first. A failed
 * insert is logged and dropped: the log must never hold a request up or grow without bound.
 */
export function createRequestLogWriter(db: Database, logger: Logger, options: { flushMs?: number; maxBatch?: number; maxQueued?: number } = {}): RequestLogWriter {
  const flushMs = options.flushMs ?? 500;
  const maxBatch = options.maxBatch ?? 200;
  const maxQueued = options.maxQueued ?? 50_000;
  let queue: RequestLogEntry[] = [];
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
        await db.insert(requestLogs).values(batch.slice(i, i + maxBatch)).onConflictDoNothing()
          .catch((err: unknown) => logger.error({ err, rows: batch.length }, 'request log write failed'));
      }
    });
    return inFlight;
  };

  return {
    record(entry) {
      if (queue.length >= maxQueued) return;
      queue.push(entry);
      if (queue.length >= maxBatch) void flush();
      else timer ??= setTimeout(() => void flush(), flushMs);
    },
    flush,
    async close() {
      await flush();
    },
  };
}
