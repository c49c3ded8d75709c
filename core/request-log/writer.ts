import type { Database } from '../db/client';
import { createBatchWriter, type BatchWriter, type BatchWriterOptions } from '../db/batch-writer';
import { requestLogs } from '../db/schema';
import type { Logger } from '../logger';
import { usageRollupUpsert } from './usage-rollup';

export type RequestLogEntry = typeof requestLogs.$inferInsert;
export type RequestLogWriter = BatchWriter<RequestLogEntry>;

/**
 * Request-log rows (spec 4.1) leave the hot path in batches; a failed insert is logged and
 * dropped. The same statement adds each batch to the hourly usage rollup (`usage_hourly`), so
 * the rollup holds exactly the rows the log took: a refused batch counts in neither.
 */
export function createRequestLogWriter(db: Database, logger: Logger, options: BatchWriterOptions = {}): RequestLogWriter {
  return createBatchWriter(db, requestLogs, logger, 'request log', Object.assign({}, options, { afterInsert: usageRollupUpsert }));
}
