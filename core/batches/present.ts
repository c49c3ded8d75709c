import type { batches, files } from '../db/schema';
import { toDollars } from '../spend/money';

export type BatchRow = typeof batches.$inferSelect;
export type FileRow = typeof files.$inferSelect;

const seconds = (at: Date | null | undefined): number | null => (at ? Math.floor(at.getTime() / 1000) : null);

/** A file as OpenAI's Files API shows it (`object: "file"`); stored files are always `processed`. */
export function presentFile(row: FileRow) {
  return {
    id: row.id,
    object: 'file' as const,
    bytes: row.bytes,
    created_at: seconds(row.createdAt)!,
    expires_at: seconds(row.expiresAt),
    filename: row.filename,
    purpose: row.purpose,
    status: 'processed' as const,
    status_details: null,
  };
}

/**
 * A batch as OpenAI's Batch API shows it: its status and timestamps, the files it wrote, and
 * `request_counts` (`completed` the items answered 2xx, `failed` the rest that ended, never-run
 * items among them once the batch ends, as OpenAI counts expired ones).
 */
export function presentOpenAIBatch(row: BatchRow) {
  return {
    id: row.id,
    object: 'batch' as const,
    endpoint: row.endpoint,
    errors: row.errors ? { object: 'list' as const, data: row.errors } : null,
    input_file_id: row.inputFileId,
    completion_window: row.completionWindow,
    status: row.status,
    output_file_id: row.outputFileId,
    error_file_id: row.errorFileId,
    created_at: seconds(row.createdAt)!,
    in_progress_at: seconds(row.inProgressAt),
    expires_at: seconds(row.expiresAt),
    finalizing_at: seconds(row.finalizingAt),
    completed_at: seconds(row.completedAt),
    failed_at: seconds(row.failedAt),
    expired_at: seconds(row.expiredAt),
    cancelling_at: seconds(row.cancellingAt),
    cancelled_at: seconds(row.cancelledAt),
    request_counts: { total: row.total, completed: row.completed, failed: row.failed + row.unrun },
    metadata: row.metadata ?? null,
    // Gateway extensions: what the items cost, and how many were run again after a lost attempt.
    usage_cost: toDollars(row.costNanos),
    rerun_count: row.rerun,
  };
}
