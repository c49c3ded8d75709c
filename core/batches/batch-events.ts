import type { Executor } from '../db/client';
import type { BatchStatus } from '../db/schema';
import { endpointReceivers, queueEvents, type QueuedDelivery } from '../webhooks/fan-out';
import { presentAnthropicBatch, presentOpenAIBatch, type BatchRow } from './present';

/** The event each ending sends (issue 56) to the endpoints that name it. */
const EVENT_OF: Partial<Record<BatchStatus, string>> = {
  completed: 'batch.completed', failed: 'batch.failed', expired: 'batch.expired', cancelled: 'batch.cancelled',
};

/**
 * Queues the event of a batch that has just ended, in the caller's transaction (the one that
 * moved it), with the batch as its wire shows it; the caller starts the deliveries once that has
 * committed, and the delivery sweep starts any whose start was lost.
 */
export async function queueBatchEvent(db: Executor, row: BatchRow, publicUrl: string, now: Date): Promise<QueuedDelivery[]> {
  const type = EVENT_OF[row.status];
  if (!type) return [];
  const data = row.wire === 'anthropic' ? presentAnthropicBatch(row, publicUrl) : presentOpenAIBatch(row);
  return queueEvents(db, { orgId: row.orgId, type, data, jobId: null, now }, await endpointReceivers(db, row.orgId, type));
}
