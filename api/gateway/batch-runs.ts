import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { and, eq, inArray, type SQL } from 'drizzle-orm';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import { withinReach } from '../../core/auth/key-reach';
import { batchEnded, type BatchRow } from '../../core/batches/present';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { batches } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import { errorSummary, type Logger } from '../../core/logger';
import { BATCH_CANCEL_SIGNAL, BATCH_CHUNK_ITEMS, BATCH_CHUNKS_PER_RUN, BATCH_ITEM_CONCURRENCY, NATIVE_BATCH_CHECK_MS, scaledInfraRetry, searchAttributeKeys, taskQueue, workflowIds, type BatchRunInput } from '../../workflows/definitions';
import { withTemporalDeadline } from '../temporal-client';
import type { JobServices } from './jobs';

/** The completion window both wires take (OpenAI's one value; Anthropic's batches end within 24 hours). */
export const BATCH_WINDOW_MS = 24 * 3_600_000;

/** A key reads the batches within its reach, as it reads jobs (core/auth/key-reach.ts). */
export function batchVisibility(key: KeyContext): SQL {
  return withinReach(key, batches);
}

export const unknownBatch = (id: string) => new GatewayError('resource_not_found', `No batch \`${id}\` within this key's reach.`);

export async function visibleBatch(db: Database, key: KeyContext, id: string, wire: BatchRow['wire']): Promise<BatchRow> {
  const [row] = await db.select().from(batches).where(and(eq(batches.id, id), eq(batches.wire, wire), batchVisibility(key)));
  if (!row) throw unknownBatch(id);
  return row;
}

/**
 * Records a batch over a stored input file and starts its `batchRun` workflow on the jobs
 * queue (issue 56), for either wire. A start Temporal refuses leaves no batch behind.
 */
export async function startBatch(deps: { db: Database; clock: Clock; jobs: JobServices }, key: KeyContext, batch: { id?: string; wire: BatchRow['wire']; endpoint: string; inputFileId: string; completionWindow: string; metadata: Record<string, string> | null }): Promise<BatchRow> {
  const now = deps.clock.now();
  const [created] = await deps.db.insert(batches).values({
    id: batch.id ?? newId(batch.wire === 'anthropic' ? 'msgbatch' : 'batch', now.getTime()),
    orgId: key.orgId, keyId: key.keyId, lineageId: key.lineageId, projectId: key.projectId,
    wire: batch.wire, endpoint: batch.endpoint, inputFileId: batch.inputFileId, completionWindow: batch.completionWindow,
    metadata: batch.metadata, chunkItems: deps.jobs.batches?.chunkItems ?? BATCH_CHUNK_ITEMS,
    createdAt: now, updatedAt: now,
    expiresAt: new Date(now.getTime() + Math.round(BATCH_WINDOW_MS * deps.jobs.scheduleScale)),
  }).returning();
  const workflowInput: BatchRunInput = {
    batchId: created!.id, orgId: key.orgId,
    concurrency: deps.jobs.batches?.itemConcurrency ?? BATCH_ITEM_CONCURRENCY,
    chunksPerRun: deps.jobs.batches?.chunksPerRun ?? BATCH_CHUNKS_PER_RUN,
    retryMs: scaledInfraRetry(deps.jobs.scheduleScale),
    nativeCheckMs: Math.max(1, Math.round(NATIVE_BATCH_CHECK_MS * deps.jobs.scheduleScale)),
  };
  try {
    await withTemporalDeadline(deps.jobs.temporal, () => deps.jobs.temporal.workflow.start('batchRun', {
      workflowId: workflowIds.batchRun(created!.id),
      taskQueue: taskQueue('jobs', deps.jobs.taskQueuePrefix),
      args: [workflowInput],
      typedSearchAttributes: [
        { key: searchAttributeKeys.orgId, value: key.orgId },
        { key: searchAttributeKeys.keyId, value: key.keyId },
      ],
    }));
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
      // Refused, or its answer lost: the batch is kept, ended `failed` (its run, if the start
      // did reach Temporal, finds it so at its first step and ends without running anything).
      const now = deps.clock.now();
      await deps.db.update(batches).set({ status: 'failed', failedAt: now, updatedAt: now, errors: [{ code: 'batch_not_started', message: 'The batch could not be started; none of it ran. Create it again.', param: null, line: null }] })
        .where(and(eq(batches.id, created!.id), eq(batches.status, 'validating')));
      throw err;
    }
  }
  return created!;
}

/**
 * A batch's cancel: it moves to `cancelling` at once and its run is told; items in flight finish
 * and are kept, no new one starts, and the run ends it `cancelled`. An ended batch is refused.
 */
export async function cancelBatch(deps: { db: Database; clock: Clock; jobs: JobServices }, row: BatchRow, log?: Logger): Promise<BatchRow> {
  if (batchEnded(row)) throw new GatewayError('invalid_request', `Batch \`${row.id}\` has already ended (${row.status}).`);
  const now = deps.clock.now();
  const [moved] = await deps.db.update(batches).set({ status: 'cancelling', cancellingAt: now, updatedAt: now })
    .where(and(eq(batches.id, row.id), inArray(batches.status, ['validating', 'in_progress']))).returning();
  if (moved) {
    // Not awaited: the run reads `cancelling` before each wave of items even without the signal.
    void withTemporalDeadline(deps.jobs.temporal, () => deps.jobs.temporal.workflow.getHandle(workflowIds.batchRun(row.id)).signal(BATCH_CANCEL_SIGNAL)).catch((err: unknown) => {
      if (!(err instanceof WorkflowNotFoundError)) log?.warn({ batch_id: row.id, err: errorSummary(err) }, 'the batch\'s run was not told of its cancel; it sees it before its next items');
    });
  }
  const [after] = await deps.db.select().from(batches).where(eq(batches.id, row.id));
  return after!;
}
