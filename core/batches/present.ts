import { TERMINAL_BATCH_STATUSES, type batches, type files } from '../db/schema';
import { toDollars } from '../spend/money';

export type BatchRow = typeof batches.$inferSelect;
export type FileRow = typeof files.$inferSelect;

const seconds = (at: Date | null | undefined): number | null => (at ? Math.floor(at.getTime() / 1000) : null);

/** Whether a batch has ended (completed, failed, expired or cancelled). */
export const batchEnded = (row: Pick<BatchRow, 'status'>): boolean => (TERMINAL_BATCH_STATUSES as readonly string[]).includes(row.status);

/** When a batch ended: its terminal status's time; null while it runs. */
export function batchEndedAt(row: BatchRow): Date | null {
  return batchEnded(row) ? row.completedAt ?? row.cancelledAt ?? row.expiredAt ?? row.failedAt ?? row.updatedAt : null;
}

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

const isoOrNull = (at: Date | null | undefined): string | null => (at ? at.toISOString() : null);

/**
 * A batch as Anthropic's Message Batches API shows it: `processing_status` (`in_progress` until
 * it ends, `canceling` while a cancel takes effect), RFC 3339 times, and `request_counts` by
 * result: `succeeded`, `errored` (the budget's refusals among them), and once ended `canceled`
 * or `expired` for the items never run; `processing` the rest. `results_url` once ended.
 */
export function presentAnthropicBatch(row: BatchRow, baseUrl: string) {
  const ended = batchEnded(row);
  const unrun = row.status === 'expired' ? { canceled: 0, expired: row.unrun } : { canceled: row.unrun, expired: 0 };
  const settled = row.completed + row.failed + row.unrun;
  return {
    id: row.id,
    type: 'message_batch' as const,
    processing_status: ended ? 'ended' : row.status === 'cancelling' ? 'canceling' : 'in_progress',
    request_counts: { processing: ended ? 0 : Math.max(0, row.total - settled), succeeded: row.completed, errored: row.failed, ...unrun },
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt.toISOString(),
    ended_at: isoOrNull(batchEndedAt(row)),
    cancel_initiated_at: isoOrNull(row.cancellingAt),
    archived_at: null,
    results_url: ended && row.outputFileId ? `${baseUrl}/v1/messages/batches/${row.id}/results` : null,
    // Gateway extensions, as on the OpenAI wire.
    usage_cost: toDollars(row.costNanos),
    rerun_count: row.rerun,
  };
}
