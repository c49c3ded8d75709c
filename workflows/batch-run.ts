import { ActivityFailure, ApplicationFailure, continueAsNew, defineSignal, isCancellation, proxyActivities, setHandler } from '@temporalio/workflow';
import type { BatchActivities } from '../activities/batch-run';
import { BATCH_CANCEL_SIGNAL, infraRetryPolicy, RECORD_ACTIVITY_TIMEOUT, type BatchEnding, type BatchRunInput } from './definitions';

/** A batch's activities' failures whose messages we wrote (activities/batch-run.ts), shown in its `errors`. */
const WORDED_FAILURES = new Set(['BatchInputGone']);

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
  // Every long step heartbeats every second throughout (activities/heartbeats.ts): a lost worker
  // is noticed within the heartbeat timeout, however long the step. Reading a 200 MB input or
  // writing the output files takes minutes; a chunk's model calls may take as long as the
  // batch's window (slow reasoning models, a key's rate limit waited out).
  const fileWork = proxyActivities<BatchActivities>({ startToCloseTimeout: '2 hours', heartbeatTimeout: '10 seconds', retry });
  const chunks = proxyActivities<BatchActivities>({ startToCloseTimeout: '24 hours', heartbeatTimeout: '10 seconds', retry });
  const records = proxyActivities<BatchActivities>({ startToCloseTimeout: RECORD_ACTIVITY_TIMEOUT, retry });

  let cancelRequested = false;
  setHandler(batchCancelled, () => {
    cancelRequested = true;
  });

  try {
    return await run();
  } catch (err) {
    // A step that cannot succeed (its input gone) must not leave the batch open forever: it ends
    // `failed`, its reason ours to word, or none (a database error's text is not the customer's).
    if (!(err instanceof ActivityFailure) || isCancellation(err)) throw err;
    const worded = err.cause instanceof ApplicationFailure && WORDED_FAILURES.has(err.cause.type ?? '');
    await records.failBatch({ batchId: input.batchId, message: `The batch could not be completed because of an error on the gateway's side${worded ? `: ${(err.cause as ApplicationFailure).message}` : '.'}` });
    return { status: 'failed' };
  }

  async function run(): Promise<{ status: string }> {
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
}
