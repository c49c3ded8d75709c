import { ActivityFailure, ApplicationFailure, CancellationScope, condition, defineQuery, defineSignal, defineUpdate, isCancellation, patched, proxyActivities, setHandler, sleep, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { RenderOutcome, SubmitRefusal, VideoJobActivities } from '../activities/video-job';
import { COMPLETE_VIDEO_ATTEMPTS, downloadsQueue, infraRetryPolicy, JOB_CANCEL_SIGNAL, JOB_CANCEL_UPDATE, RECORD_ACTIVITY_TIMEOUT, searchAttributeKeys, STATUS_CHECKS_EXHAUSTED, type JobCancelResult, type VideoJobInput } from './definitions';

type Status = 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled';

export const cancelJob = defineUpdate<JobCancelResult>(JOB_CANCEL_UPDATE);
/** The API recorded a cancel in Postgres (it answers without waiting for a worker); the run ends as soon as it sees it. */
export const cancelRecorded = defineSignal(JOB_CANCEL_SIGNAL);
export const jobStatus = defineQuery<Status>('status');

/**
 * Runs started before a cancel could interrupt the call in flight let it finish; a cancel
 * replayed in their histories must not issue the cancel command they never recorded.
 */
export const CANCEL_INTERRUPTS_CALL = 'cancel-interrupts-call';

/**
 * Runs started before status checks rode the activity retry policy keep their loop of timers and
 * `checkVideo` calls, and their sleep until the output expires; new runs wait in one
 * `awaitRender` activity and end at completion (the retention schedule deletes the output).
 */
export const CHECKS_RIDE_RETRY_POLICY = 'checks-ride-retry-policy';

/** Activity failures whose messages we wrote for the job's owner (activities/video-job.ts). */
const CUSTOMER_WORDED_FAILURES = new Set(['ConnectionGone', 'NoVideoAdapter', 'DownloadRefused', 'JobGone', 'NoRender']);

/** Runs started before downloads had a queue of their own copy the output on the jobs queue. */
export const DOWNLOADS_OWN_QUEUE = 'downloads-own-queue';

/**
 * The activities of a run, retrying after our own errors on the run's `retryMs` (issue 55):
 * without a limit, since a provider's refusal is an answer (a result, not an exception), status
 * checks are counted in the job's row, and a submit is guarded by its recorded intent. Provider
 * calls heartbeat while in flight: a cancel reaches them, and a lost worker's attempt is retried,
 * within seconds rather than at the end of the five minutes. The copy of the output keeps a
 * limit: a download the provider keeps failing is its answer, and the job fails.
 */
function activitiesOf(input: VideoJobInput) {
  const retry = infraRetryPolicy(input.retryMs);
  const providerCallOptions = { startToCloseTimeout: '5 minutes', heartbeatTimeout: '10 seconds', retry } as const;
  // Named one by one: a proxy has no own keys to spread.
  const records = proxyActivities<VideoJobActivities>({ startToCloseTimeout: RECORD_ACTIVITY_TIMEOUT, retry });
  const providerCalls = proxyActivities<VideoJobActivities>(providerCallOptions);
  return {
    recordJob: records.recordJob, endJob: records.endJob, expireJobOutput: records.expireJobOutput,
    submitVideo: providerCalls.submitVideo, checkVideo: providerCalls.checkVideo,
    completeVideoOn: (taskQueue?: string) => proxyActivities<VideoJobActivities>({ ...providerCallOptions, retry: { ...retry, maximumAttempts: COMPLETE_VIDEO_ATTEMPTS }, ...(taskQueue && { taskQueue }) }).completeVideo,
    /**
     * One attempt per status check: the attempt's `nextRetryDelay` is the schedule's next wait,
     * so the policy's own intervals only pace retries after our own errors (which spend no
     * check); the check that exhausts the schedule fails with `StatusChecksExhausted`.
     */
    awaitRender: proxyActivities<VideoJobActivities>({
      startToCloseTimeout: '3 minutes',
      heartbeatTimeout: '10 seconds',
      retry: { ...retry, nonRetryableErrorTypes: [STATUS_CHECKS_EXHAUSTED] },
    }).awaitRender,
  };
}

/**
 * One video job (spec 3.1), id = the job id. Submit with failover over the candidates; then
 * status checks on the given schedule, each cancellable; success stores the output, which is
 * deleted when retention ends. Cancel is an Update: it abandons a submit or status check in
 * flight at once (a slow provider never holds it) and is answered with the job's terminal
 * status; completion is never interrupted, so a cancel that races it reports the completion.
 */
export async function videoJob(input: VideoJobInput): Promise<{ status: Status | 'abandoned' }> {
  const { recordJob, endJob, expireJobOutput, submitVideo, checkVideo, awaitRender, completeVideoOn } = activitiesOf(input);
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
  setHandler(cancelRecorded, () => {
    cancelRequested = true;
    interruptibleScope?.cancel();
  });
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
    // The customer reads our words only: a failure of a kind we word for them, else none (a
    // database error's text names its statement and values; issue 55, item 4).
    const cause = err.cause instanceof ApplicationFailure && CUSTOMER_WORDED_FAILURES.has(err.cause.type ?? '') ? `: ${err.cause.message}` : '.';
    setStatus((await endJob({ jobId: input.jobId, status: 'failed', error: { message: `The job could not be completed because of an error on the gateway's side${cause}`, type: 'internal_error', code: null } })).status as Status);
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

  async function cancel(): Promise<void> {
    setStatus((await endJob({ jobId: input.jobId, status: 'canceled' })).status as Status);
  }
  async function fail(message: string, type: string, code: string | null = null): Promise<void> {
    setStatus((await endJob({ jobId: input.jobId, status: 'failed', error: { message, type, code } })).status as Status);
  }

  /**
   * running: the first check after its wait (a cancel ends the wait), then one `awaitRender`
   * activity whose retries carry the rest of the schedule; the workflow wakes only for the
   * outcome. The run ends with the job: the output's retention is the retention schedule's.
   */
  async function awaitOutcome(accepted: VideoJobInput['candidates'][number]): Promise<{ status: Status }> {
    const [firstWait = 0] = input.checkIntervalsMs;
    let outcome: RenderOutcome | null = null;
    if (!(await condition(() => cancelRequested, firstWait))) {
      try {
        outcome = await interruptible(() => awaitRender({ jobId: input.jobId, checkIntervalsMs: input.checkIntervalsMs }));
      } catch (err) {
        if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === STATUS_CHECKS_EXHAUSTED) {
          await fail(err.cause.message, 'request_timeout');
          return { status };
        }
        throw err;
      }
    }
    if (outcome === null) await cancel();
    else if (outcome.state === 'ended') setStatus(outcome.status as Status);
    else if (outcome.state === 'failed') await fail(outcome.error.message, outcome.error.type, outcome.error.code);
    else {
      const { state: _state, ...video } = outcome;
      // The copy to storage runs on the downloads queue, whose slots checks never wait for.
      const copy = completeVideoOn(patched(DOWNLOADS_OWN_QUEUE) ? downloadsQueue(workflowInfo().taskQueue) : undefined);
      const done = await copy({ jobId: input.jobId, modelId: accepted.modelId, upstreamModel: accepted.upstreamModel, retentionMs: input.retentionMs, ...video });
      setStatus(done.status as Status);
    }
    return { status };
  }

  async function run(): Promise<{ status: Status | 'abandoned' }> {
    // A start the API refused after all (its answer lost in a Temporal outage): no job to run.
    if ((await recordJob({ job: input.job, ...(input.refusedStartGraceMs !== undefined && { refusedStartGraceMs: input.refusedStartGraceMs }) }))?.abandoned) return { status: 'abandoned' };

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
        if ('outcomeUnknown' in result && result.outcomeUnknown) {
          // The provider may be rendering it; another submit could start a second, billed render.
          await fail(`The provider did not say whether it accepted the render (${result.failure.message}), and it cannot de-duplicate a second submit; the job was not submitted elsewhere.`, 'request_timeout');
          return { status };
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
    if (patched(CHECKS_RIDE_RETRY_POLICY)) return awaitOutcome(accepted);

    // running (runs started before CHECKS_RIDE_RETRY_POLICY): each wait ends early for a cancel.
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
        const done = await completeVideoOn()({ jobId: input.jobId, modelId: accepted.modelId, upstreamModel: accepted.upstreamModel, retentionMs: input.retentionMs, ...video });
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
