import type { Database } from '../db/client';
import type { SQL } from 'drizzle-orm';
import { batchInsert, createBatchWriter, type BatchWriter, type BatchWriterOptions } from '../db/batch-writer';
import { requestLogs } from '../db/schema';
import type { Logger } from '../logger';
import type { RequestAttribution } from '../attribution/request-attribution';
import { usageRollupUpsert } from './usage-rollup';

export type RequestLogEntry = typeof requestLogs.$inferInsert;
export type RequestLogWriter = BatchWriter<RequestLogEntry>;

type Options = Omit<BatchWriterOptions<RequestLogEntry>, 'afterInsert' | 'beforeInsert' | 'prepareNow'> & { attribution?: RequestAttribution };

/**
 * Request-log rows (spec 4.1) leave the hot path in batches; an insert Postgres could not take
 * is tried again (core/db/batch-writer.ts). Each row is attributed to cost centers (issue 23) as it is recorded when its
 * organization's rules are at hand, else in its batch before the insert, and
 * the same statement adds the batch to the hourly usage rollups, so the rollups hold exactly the
 * rows the log took: a refused batch counts in neither.
 */
export function createRequestLogWriter(db: Database, logger: Logger, options: Options = {}): RequestLogWriter {
  const { attribution, ...batching } = options;
  return createBatchWriter(db, requestLogs, logger, 'request log', Object.assign({}, batching, {
    afterInsert: usageRollupUpsert,
    beforeInsert: attribution ? (rows: RequestLogEntry[]) => attribution.attributeRows(rows) : undefined,
    prepareNow: attribution ? (row: RequestLogEntry) => attribution.attributeRowNow(row) : undefined,
  }));
}

/**
 * Request-log rows written at once, in the caller's transaction, with their part of the hourly
 * usage rollups in the same statement: for rows recorded outside the request path (a native
 * batch's items, activities/native-batch.ts) whose writing must commit with what they log.
 */
export function requestLogInsert(rows: RequestLogEntry[]): SQL {
  const insert = batchInsert(requestLogs, usageRollupUpsert);
  return insert.statement(rows.map((row) => insert.text(row)));
}
