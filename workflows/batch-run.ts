import { continueAsNew, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { BatchActivities } from '../activities/batch-run';
import { BATCH_CANCEL_SIGNAL, infraRetryPolicy, type BatchEnding, type BatchRunInput } from './definitions';

export const batchCancelled = defineSignal(BATCH_CANCEL_SIGNAL);

/**
 * One batch (issue 56), id = the batch id: validate the input, run its items a chunk at a time,
 * write the output and error files. Every item's answer is recorded in Postgres as it comes,
 * keyed by its line, so a chunk retried after a lost worker runs only what was not recorded and
 * the output holds each item once. A cancel (the API writes `cancelling`, then signals) stops
 * new items and keeps the finished ones; the completion window, a budget with no room, the same.
 * The run continues as new every `chunksPerRun` chunks, so its history stays small however
 * large the batch.
 */
export async function batchRun(input: BatchRunInput): Promise<{ status: string }> {
  const retry = infraRetryPolicy(input.retryMs);
  // Reading a 200 MB input, or writing the output files, takes a while: they heartbeat as they go.
  const fileWork = proxyActivities<BatchActivities>({ startToCloseTimeout: '30 minutes', heartbeatTimeout: '30 seconds', retry });
  // A chunk's items are model calls of up to the gateway's upstream timeout each; the attempt
  // heartbeats every second throughout, so a lost worker is noticed in seconds.
  const chunks = proxyActivities<BatchActivities>({ startToCloseTimeout: '1 hour', heartbeatTimeout: '10 seconds', retry });

  let cancelRequested = false;
  setHandler(batchCancelled, () => {
    cancelRequested = true;
  });

  let chunkCount: number;
  let next: number;
  if (input.resume) {
    ({ chunks: chunkCount, nextChunk: next } = input.resume);
  } else {
    const validated = await fileWork.validateBatchInput({ batchId: input.batchId });
    if (validated.status === 'failed') return { status: 'failed' };
    chunkCount = validated.chunks;
    next = 0;
  }

  let ending: BatchEnding = { status: 'completed' };
  for (let ran = 0; next < chunkCount; next += 1, ran += 1) {
    if (ran === input.chunksPerRun) await continueAsNew<typeof batchRun>({ ...input, resume: { chunks: chunkCount, nextChunk: next } });
    if (cancelRequested) {
      ending = { status: 'cancelled' };
      break;
    }
    const result = await chunks.runBatchChunk({ batchId: input.batchId, chunk: next, concurrency: input.concurrency });
    if (result.stopped === 'budget') {
      ending = { status: 'completed', unrun: result.refusal };
      break;
    }
    if (result.stopped) {
      ending = { status: result.stopped };
      break;
    }
  }
  await fileWork.finalizeBatch({ batchId: input.batchId, ending });
  return { status: ending.status };
}
