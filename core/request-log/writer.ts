import type { Database } from '../db/client';
import { createBatchWriter, type BatchWriter, type BatchWriterOptions } from '../db/batch-writer';
import { requestLogs } from '../db/schema';
import type { Logger } from '../logger';

export type RequestLogEntry = typeof requestLogs.$inferInsert;
export type RequestLogWriter = BatchWriter<RequestLogEntry>;

/** Request-log rows (spec 4.1) leave the hot path in batches; a failed insert is logged and dropped. */
export function createRequestLogWriter(db: Database, logger: Logger, options: BatchWriterOptions = {}): RequestLogWriter {
  return createBatchWriter(db, requestLogs, logger, 'request log', options);
}
