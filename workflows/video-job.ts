import { ActivityFailure, CancellationScope, condition, defineQuery, defineUpdate, isCancellation, patched, proxyActivities, setHandler, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type { SubmitRefusal, VideoJobActivities } from '../activities/video-job';
import { JOB_CANCEL_UPDATE, searchAttributeKeys, type JobCancelResult, type VideoJobInput } from './definitions';

type Status = 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled';

export const cancelJob = defineUpdate<JobCancelResult>(JOB_CANCEL_UPDATE);
export const jobStatus = defineQuery<Status>('status');

/**
 * Runs started before a cancel could interrupt the call in flight let it finish; a cancel
 * replayed in their histories must not issue the cancel command they never recorded.
 */
export const CANCEL_INTERRUPTS_CALL = 'cancel-interrupts-call';

// Infrastructure errors (Postgres away, a download cut) retry; provider refusals are answers.
const retry = { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 20 };
const { recordJob, endJob, expireJobOutput } = proxyActivities<VideoJobActivities>({ startToCloseTimeout: '5 minutes', retry });
// Provider calls heartbeat while in flight: a cancel reaches them, and a lost worker's attempt
// is retried, within seconds rather than at the end of the five minutes.
const { submitVideo, checkVideo, completeVideo } = proxyActivities<VideoJobActivities>({ startToCloseTimeout: '5 minutes', heartbeatTimeout: '10 seconds', retry });

/**
 * One video job (spec 3.1), id = the job id. Submit with failover over the candidates; then
 * status checks on the given schedule, each cancellable; success stores the output, which is
 * deleted when retention ends. Cancel is an Update: it abandons a submit or status check in
 * flight at once (a slow provider never holds it) and is answered with the job's terminal
 * status; completion is never interrupted, so a cancel that races it reports the completion.
 */
export async function videoJob(input: VideoJobInput): Promise<{ status: Status }> {
  let status: Status = 'queued';
  let cancelRequested = false;
  /** The submit or status check in flight, which a cancel interrupts. */
  let interruptibleScope: CancellationScope | null = null;
  const terminal = () => status === 'succeeded' || status === 'failed' || status === 'canceled';
  const setStatus = (next: Status) => {
    status = next;
    upsertSearchAttributes([{ key: searchAttributeKeys.jobStatus, value: next }]);
  };

  setHandler(jobStatus, () => status);
  setHandler(cancelJob, async () => {
    cancelRequested = true;
    if (interruptibleScope && patched(CANCEL_INTERRUPTS_CALL)) interruptibleScope.cancel();
    await condition(terminal);
    return { status };
  });

  try {
    return await run();
  } catch (err) {
    // An activity that gave up (the connection deleted, storage failing past its retries) must
    // not leave the job queued or running forever: it ends `failed`, with its event.
    if (!(err instanceof ActivityFailure) || terminal()) throw err;
    const reason = err.cause?.message ?? err.message;
    setStatus((await endJob({ jobId: input.jobId, status: 'failed', error: { message: `The job could not be completed: ${reason}`, type: 'internal_error', code: null } })).status as Status);
    return { status };
  }

  /** Runs a provider call that a cancel abandons; null when it was (or would be) abandoned. */
  async function interruptible<T>(call: () => Promise<T>): Promise<T | null> {
    if (cancelRequested) return null;
    const scope = new CancellationScope({ cancellable: true });
    interruptibleScope = scope;
    try {
      return await scope.run(call);
    } catch (err) {
      if (cancelRequested && isCancellation(err)) return null;
      throw err;
    } finally {
      interruptibleScope = null;
    }
  }

  async function run(): Promise<{ status: Status }> {
    const cancel = async () => setStatus((await endJob({ jobId: input.jobId, status: 'canceled' })).status as Status);
    const fail = async (message: string, type: string, code: string | null = null) =>
      setStatus((await endJob({ jobId: input.jobId, status: 'failed', error: { message, type, code } })).status as Status);

    await recordJob({ job: input.job });

    // queued: failover between targets happens only here; a running render is never moved.
    let accepted: VideoJobInput['candidates'][number] | null = null;
    const refusals: SubmitRefusal[] = [];
    submitting: for (const [index, candidate] of input.candidates.entries()) {
      for (let retries = 0; ; retries++) {
        const result = await interruptible(() => submitVideo({ jobId: input.jobId, candidateIndex: index, candidate }));
        if (result === null) break submitting;
        if (result.ok) {
          accepted = candidate;
          break submitting;
        }
        refusals.push({ candidate, failure: result.failure });
        const action = input.failover[result.failure.kind] ?? 'failover';
        if (action === 'stop') break submitting;
        if (action === 'retry' && retries < input.maxRetries) continue;
        break;
      }
    }
    if (cancelRequested && !accepted) {
      await cancel();
      return { status };
    }
    if (!accepted) {
      setStatus((await endJob({ jobId: input.jobId, status: 'failed', submitRefusals: refusals })).status as Status);
      return { status };
    }
    setStatus('running');

    // running: each wait ends early for a cancel.
    for (const wait of input.checkIntervalsMs) {
      if (await condition(() => cancelRequested, wait)) break;
      const check = await interruptible(() => checkVideo({ jobId: input.jobId }));
      if (check === null) break;
      if (check.state === 'failed') {
        await fail(check.error.message, check.error.type, check.error.code);
        return { status };
      }
      if (check.state === 'succeeded') {
        const { state: _state, ...video } = check;
        const done = await completeVideo({ jobId: input.jobId, modelId: accepted.modelId, upstreamModel: accepted.upstreamModel, retentionMs: input.retentionMs, ...video });
        setStatus(done.status as Status);
        if (done.expiresAt) {
          // Retention: the output link works for its hours, then the file goes.
          await sleep(Math.max(0, Date.parse(done.expiresAt) - Date.now()));
          await expireJobOutput({ jobId: input.jobId });
        }
        return { status };
      }
    }
    if (cancelRequested) {
      await cancel();
      return { status };
    }
    await fail(`The provider gave no final answer after ${input.checkIntervalsMs.length} status checks.`, 'request_timeout');
    return { status };
  }
}
