import { ActivityFailure, ApplicationFailure, continueAsNew, defineSignal, isCancellation, proxyActivities, setHandler } from '@temporalio/workflow';
import type { BatchActivities } from '../activities/batch-run';
import type { NativeBatchActivities } from '../activities/native-batch';
import { BATCH_CANCEL_SIGNAL, infraRetryPolicy, NATIVE_BATCH_CHECK_MS, RECORD_ACTIVITY_TIMEOUT, type BatchEnding, type BatchRunInput } from './definitions';

/** A batch's activities' failures whose messages we wrote (activities/batch-run.ts, native-batch.ts), shown in its `errors`. */
const WORDED_FAILURES = new Set(['BatchInputGone', 'NativeBatchRefused']);

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
  // A batch a provider runs: its submit and the reading of its results beat like file work; its
  // status checks ride the activity retry policy (each attempt one check, its wait the next).
  const native = proxyActivities<NativeBatchActivities>({ startToCloseTimeout: '2 hours', heartbeatTimeout: '10 seconds', retry });
  const statusChecks = proxyActivities<NativeBatchActivities>({ startToCloseTimeout: '11 minutes', heartbeatTimeout: '10 seconds', retry });

  let cancelRequested = false;
  /** Whether the batch runs on a provider's batch API: a failure then ends its holds and its provider batch. */
  let runsNatively = false;
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
    if (runsNatively) await native.abandonNativeBatch({ batchId: input.batchId });
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
      if (validated.native) {
        runsNatively = true;
        return runNative();
      }
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

  /**
   * On the provider's own batch API: the worst case held part by part and the held items sent
   * as one provider batch, followed until it ends (our cancel and window passed on to it), its
   * results recorded by line, then the same output files as a batch the gateway runs.
   */
  async function runNative(): Promise<{ status: string }> {
    let ending: BatchEnding;
    const submitted = cancelRequested ? null : await native.submitNativeBatch({ batchId: input.batchId });
    if (!submitted || submitted.cancelled) {
      ending = { status: 'cancelled' };
    } else if (!submitted.submitted) {
      ending = { status: 'completed', ...(submitted.refusal && { unrun: submitted.refusal }) };
    } else {
      const status = await statusChecks.awaitNativeBatch({ batchId: input.batchId, checkEveryMs: input.nativeCheckMs ?? NATIVE_BATCH_CHECK_MS });
      const collected = await native.collectNativeBatch({ batchId: input.batchId, status });
      if ('failed' in collected) {
        await records.failBatch({ batchId: input.batchId, message: `The batch could not be completed: ${collected.failed}` });
        return { status: 'failed' };
      }
      ending = collected.ending;
    }
    await fileWork.finalizeBatch({ batchId: input.batchId, ending });
    return { status: ending.status };
  }
}
