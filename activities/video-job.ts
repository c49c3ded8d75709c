import { and, eq, isNull, sql } from 'drizzle-orm';
import type { Agent } from 'undici';
import dns from 'node:dns/promises';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { beatingThroughout } from './heartbeats';
import { ApplicationFailureCategory } from '@temporalio/common';
import { allocateJob, allocationColumns } from '../core/attribution/job-attribution';
import type { Clock } from '../core/clock';
import type { Sealer } from '../core/crypto/sealing';
import type { Database } from '../core/db/client';
import { endJobHold } from '../core/spend/job-spend';
import type { RedisHandle } from '../core/redis';
import { boundedCache } from '../core/bounded-cache';
import { jobs, providerConnections, spendLedger, type JobError } from '../core/db/schema';
import { finalError } from '../core/chat/outcome';
import { endJobUnpaid } from '../core/jobs/end-job';
import { finishJob, jobRowOf, type JobLinks, type NewJobRecord } from '../core/jobs/job-store';
import { plannedSeconds, videoJobPrice } from '../core/jobs/video-cost';
import { pendingJobDeliveries } from '../core/webhooks/fan-out';
import type { StartDeliveries } from './webhook-dispatch';
import type { Candidate } from '../core/routing/candidates';
import { isPublicAddress } from '../core/net/public-address';
import { cleanProviderText } from '../core/providers/errors';
import { isProviderKind, type ProviderKind } from '../core/providers/kinds';
import { openConnection } from '../core/providers/open-connection';
import { sendUpstream, type UpstreamTarget } from '../core/providers/upstream';
import type { ProviderFailure } from '../core/providers/types';
import { VIDEO_ADAPTERS } from '../core/providers/video';
import type { OutputStorage } from '../core/storage/output-storage';
import { STATUS_CHECKS_EXHAUSTED, type VideoCandidate } from '../workflows/definitions';

export type VideoJobDeps = { db: Database; redis: RedisHandle; clock: Clock; sealer: Sealer; storage: OutputStorage; agent: Agent; links: JobLinks; startDeliveries: StartDeliveries } & VideoJobHooks;

/**
 * Test-only: `afterSubmitAccepted` runs after the provider accepted a submit and before the
 * job row records it, the window a lost worker leaves (the exactly-once test kills it there).
 */
export type VideoJobHooks = { afterSubmitAccepted?: (jobId: string) => Promise<void> | void };

/** A submit's Idempotency-Key, and the intent its row records while it is in flight. */
const submitKey = (jobId: string, candidateIndex: number) => `${jobId}-${candidateIndex}`;

/** What a submit attempt heartbeats once the provider accepted: its retry needs nothing more. */
type SubmitHeartbeat = { submitAccepted: { key: string; providerJobId: string } };

/** The render an earlier attempt of this submit saw accepted (its last heartbeat), or null. */
function acceptedEarlier(details: unknown, key: string): string | null {
  const accepted = (details as Partial<SubmitHeartbeat> | undefined)?.submitAccepted;
  return accepted?.key === key && typeof accepted.providerJobId === 'string' ? accepted.providerJobId : null;
}

/**
 * How long a run whose start the API refused waits for the client's retry (same Idempotency-Key)
 * to reserve again before it ends without submitting: a retry's own start then finds this run,
 * which goes on. Real time, not scaled: it waits for clients.
 */
export const REFUSED_START_GRACE_MS = 60_000;

/** Calls to a provider's video API wait this long for an answer. */
const VIDEO_CALL_TIMEOUT_MS = 60_000;
/**
 * Runs a provider call heartbeating, so a cancel reaches the activity within seconds and a
 * lost worker is noticed by its missing heartbeats; the call is aborted when the activity is
 * cancelled (or its worker shuts down) and after `timeoutMs`.
 */
async function heartbeating<T>(timeoutMs: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const context = Context.current();
  return beatingThroughout(() => call(AbortSignal.any([context.cancellationSignal, AbortSignal.timeout(timeoutMs)])));
}

/**
 * `awaitRender`'s failures. `RenderRunning` is retryable: the retry policy carries the status
 * check schedule (each attempt's `nextRetryDelay` is the wait before the next check), and the
 * Temporal UI shows it as the pending activity's last failure, with the progress. The 60th check
 * without a final answer is `StatusChecksExhausted`, not retryable.
 */
export const RENDER_RUNNING = 'RenderRunning';
/** A submit whose outcome is unknown, retried (by the activity's policy) on the same candidate with the same key. */
export const SUBMIT_OUTCOME_UNKNOWN = 'SubmitOutcomeUnknown';

/** What one status check found out, when it is final. */
export type RenderOutcome =
  | { state: 'succeeded'; durationSeconds: number | null; resolution: string | null; aspectRatio: string | null; mimeType: string; download: string }
  | { state: 'failed'; error: JobError }
  /** The job ended meanwhile (a cancel recorded by the API): nothing to wait for. */
  | { state: 'ended'; status: string };

/** Failures that say nothing final about the render: the check counts and the next one follows. */
const TRANSIENT_CHECK_FAILURES = new Set<ProviderFailure['kind']>(['timeout', 'server_error', 'rate_limit', 'connection']);

/** A status check the provider refused for good (credential rejected, render unknown): the job's error. */
function refusedCheckError(connectionId: string, failure: ProviderFailure): JobError {
  const status = failure.status ? ` (HTTP ${failure.status})` : '';
  const what = failure.kind === 'credential' ? 'rejected the connection\'s credential' : failure.kind === 'model_not_served' ? 'no longer knows the render' : 'refused to report on the render';
  return { message: `The provider ${what}${status} on ${connectionId}: ${cleanProviderText(failure.message).slice(0, 500)}`, type: 'upstream_error', code: null };
}

/**
 * Whether a download URL the provider handed back may be fetched: a path under the connection,
 * a URL on one of the connection's own hosts, or an http(s) URL whose host is (and resolves
 * only to) public addresses. Link-local, metadata, loopback and private addresses are refused
 * whatever GW_ALLOW_PRIVATE_NETWORK says: a provider never legitimately hands one out.
 * Answers why it is refused, or null.
 */
export async function refusedDownload(path: string, baseUrls: string[]): Promise<string | null> {
  if (!/^[a-z][a-z0-9+.-]*:/i.test(path)) return null;
  let url: URL;
  try {
    url = new URL(path);
  } catch {
    return 'it is not a URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `its scheme ${url.protocol} is not http(s)`;
  if (baseUrls.some((b) => new URL(b).host === url.host)) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = /^[0-9.]+$|:/.test(host) ? [host] : (await dns.lookup(host, { all: true })).map((a) => a.address);
  const blocked = addresses.find((a) => !isPublicAddress(a));
  return blocked ? `its host ${url.hostname} is not a public address (${blocked})` : null;
}

type Connection = { kind: ProviderKind; target: UpstreamTarget };
type ConnectionRow = typeof providerConnections.$inferSelect;
type JobRow = typeof jobs.$inferSelect;

/**
 * Connections opened, by id and version: a render is checked every few minutes for as long as
 * it runs, and opening the sealed secret again for each check is wasted work. A changed
 * connection has a new version; an entry lives five minutes at most.
 */
const openedConnections = boundedCache<string, Connection>(1_000, { ttl: 5 * 60_000 });

function connectionOf(deps: VideoJobDeps, c: ConnectionRow | null | undefined, connectionId: string): Connection {
  if (!c || !isProviderKind(c.kind)) throw ApplicationFailure.nonRetryable(`connection ${connectionId} is gone`, 'ConnectionGone');
  const key = `${c.id}:${c.version}:${c.updatedAt.getTime()}`;
  const cached = openedConnections.get(key);
  if (cached) return cached;
  const opened = openConnection(c, deps.sealer);
  const connection: Connection = {
    kind: c.kind,
    target: { kind: c.kind, baseUrls: [opened.baseUrl, ...c.alternateBaseUrls], secrets: opened.secrets, timeoutMs: c.timeoutMs ?? VIDEO_CALL_TIMEOUT_MS },
  };
  openedConnections.set(key, connection);
  return connection;
}

async function loadConnection(deps: VideoJobDeps, orgId: string, connectionId: string): Promise<Connection> {
  const [c] = await deps.db.select().from(providerConnections).where(and(eq(providerConnections.orgId, orgId), eq(providerConnections.id, connectionId)));
  return connectionOf(deps, c, connectionId);
}

async function loadJob(deps: VideoJobDeps, jobId: string): Promise<JobRow> {
  const [job] = await deps.db.select().from(jobs).where(eq(jobs.id, jobId));
  if (!job) throw ApplicationFailure.nonRetryable(`job ${jobId} does not exist`, 'JobGone');
  return job;
}

/**
 * The two statements every status check runs, built once and prepared (named) on each pooled
 * connection: a check is the durable side's commonest step, and building the query each time
 * was the largest part of the worker's own CPU per check (drizzle's query builder, profiled).
 */
function statusCheckStatements(db: Database) {
  const p = { jobId: sql.placeholder('jobId'), progress: sql.placeholder('progress'), now: sql.placeholder('now') };
  return {
    /** A job and the connection its render runs on, in one query. */
    jobAndConnection: db.select({ job: jobs, connection: providerConnections }).from(jobs)
      .leftJoin(providerConnections, and(eq(providerConnections.id, jobs.connectionId), eq(providerConnections.orgId, jobs.orgId)))
      .where(eq(jobs.id, p.jobId)).prepare('gw_status_check_read'),
    /** The check counted, and the progress it read (null: none) kept while the job still runs, in one write. */
    countCheck: db.update(jobs).set({
      statusChecks: sql`${jobs.statusChecks} + 1`,
      progress: sql`case when ${p.progress}::real is not null and ${jobs.status} = 'running' then ${p.progress}::real else ${jobs.progress} end`,
      updatedAt: sql`case when ${p.progress}::real is not null and ${jobs.status} = 'running' then ${p.now}::timestamptz else ${jobs.updatedAt} end`,
    }).where(eq(jobs.id, p.jobId)).returning({ checks: jobs.statusChecks }).prepare('gw_status_check_count'),
  };
}

/**
 * Spec 2.1: the model the caller named, or, when a route ran, the model its target named;
 * never the deployment name a connection's model map sends upstream.
 */
function servedModel(job: { model: string; routeSlug: string | null }, candidate: VideoCandidate): string {
  if (!job.routeSlug) return job.model;
  const vendor = `${candidate.kind}/`;
  return candidate.modelId.startsWith(vendor) ? candidate.modelId.slice(vendor.length) : candidate.modelId;
}

function adapterFor(kind: ProviderKind) {
  const adapter = VIDEO_ADAPTERS[kind];
  if (!adapter) throw ApplicationFailure.nonRetryable(`kind ${kind} renders no video`, 'NoVideoAdapter');
  return adapter;
}

/** A job's request as the API recorded it (`extra`: the wires' parameters the client set). */
type VideoRequest = { prompt: string; duration_seconds?: number; seed?: number; extra?: Record<string, unknown> };

/** A candidate that refused the submit, and how. */
export type SubmitRefusal = { candidate: VideoCandidate; failure: ProviderFailure };

function submitError(refusals: SubmitRefusal[]): JobError {
  const error = finalError(refusals.map((r) => ({
    candidate: { connection: { id: r.candidate.connectionId, kind: r.candidate.kind }, upstreamModel: r.candidate.upstreamModel } as Candidate,
    failure: r.failure,
  })));
  return error.toBody().error as JobError;
}

export function createVideoJobActivities(deps: VideoJobDeps) {
  const statements = statusCheckStatements(deps.db);
  /**
   * One status check: progress is written as the provider reports it. A transient failure
   * (timeout, 5xx, 429, connection) counts as a check without an answer; a refusal for good
   * (credential rejected, render not found) ends the job. A finished render whose download
   * points at a non-public address fails the job before anything is fetched.
   */
  async function checkOnce(job: JobRow, connectionRow?: ConnectionRow | null): Promise<{ state: 'running'; checks: number; progress: number } | Exclude<RenderOutcome, { state: 'ended' }>> {
    const jobId = job.id;
    if (job.status !== 'running' || !job.connectionId || !job.providerJobId) return { state: 'running', checks: job.statusChecks, progress: job.progress };
    const connection = connectionRow === undefined ? await loadConnection(deps, job.orgId, job.connectionId) : connectionOf(deps, connectionRow, job.connectionId);
    const adapter = adapterFor(connection.kind);
    const providerJobId = job.providerJobId;
    const answer = await heartbeating(VIDEO_CALL_TIMEOUT_MS * 2, async (signal) => {
      const sent = await sendUpstream(deps.agent, adapter, connection.target, adapter.status(providerJobId), signal);
      return sent.ok ? { ok: true as const, status: adapter.parseStatus(await sent.body.json(), providerJobId) } : sent;
    });
    // The check is counted, and the progress it read kept (while the job still runs), in one write.
    const progress = answer.ok && answer.status.state === 'running' ? answer.status.progress : null;
    const [counted] = await statements.countCheck.execute({ jobId, progress, now: deps.clock.now().toISOString() });
    const checks = counted?.checks ?? job.statusChecks + 1;
    if (!answer.ok) {
      if (TRANSIENT_CHECK_FAILURES.has(answer.failure.kind)) return { state: 'running', checks, progress: job.progress };
      return { state: 'failed', error: refusedCheckError(job.connectionId, answer.failure) };
    }
    const { status } = answer;
    if (status.state === 'running') return { state: 'running', checks, progress: status.progress ?? job.progress };
    if (status.state === 'failed') return { state: 'failed', error: { message: `The provider failed to render the video: ${status.message}`, type: 'upstream_error', code: null } };
    const refused = await refusedDownload(adapter.content(providerJobId, status.download).path, connection.target.baseUrls);
    if (refused) return { state: 'failed', error: { message: `The provider pointed the finished video's download at an address the gateway does not fetch: ${refused}.`, type: 'upstream_error', code: null } };
    return status;
  }

  /** One attempt of `awaitRender` (below): a status check, or the failure that schedules the next. */
  async function awaitRenderOnce(input: { jobId: string; checkIntervalsMs: number[] }): Promise<RenderOutcome> {
    const [found] = await statements.jobAndConnection.execute({ jobId: input.jobId });
    if (!found) throw ApplicationFailure.nonRetryable(`job ${input.jobId} does not exist`, 'JobGone');
    const { job, connection } = found;
    if (job.status !== 'running' || !job.connectionId || !job.providerJobId) {
      // Running without a provider id cannot happen after an accepted submit; a job already
      // terminal (canceled through the API while no worker ran it) has nothing left to wait for.
      if (job.status === 'queued' || job.status === 'running') throw ApplicationFailure.nonRetryable(`job ${job.id} is ${job.status} without a render to check`, 'NoRender');
      return { state: 'ended', status: job.status };
    }
    const check = await checkOnce(job, connection);
    if (check.state !== 'running') return check;
    const { checks } = check;
    const limit = input.checkIntervalsMs.length;
    const progress = `${Math.round(check.progress * 100)}%`;
    if (checks >= limit) throw ApplicationFailure.create({ type: STATUS_CHECKS_EXHAUSTED, message: `The provider gave no final answer after ${limit} status checks.`, nonRetryable: true, details: [{ checks, progress }] });
    const nextInMs = input.checkIntervalsMs[checks]!;
    throw ApplicationFailure.create({
      type: RENDER_RUNNING,
      // Waiting is not an error: logged at DEBUG by the SDK, not counted as a failed activity.
      category: ApplicationFailureCategory.BENIGN,
      message: `render running: progress ${progress} after check ${checks} of ${limit}; next check in ${nextInMs} ms`,
      nextRetryDelay: nextInMs,
      details: [{ checks, progress }],
    });
  }

  /** One attempt of `submitVideo` (below); `onAccepted` keeps the accepted render in the attempt's heartbeats. */
  async function submitOnce(input: { jobId: string; candidateIndex: number; candidate: VideoCandidate }, onAccepted: (beat: SubmitHeartbeat) => void): Promise<{ ok: true } | { ok: false; failure: ProviderFailure; outcomeUnknown?: true }> {
    const job = await loadJob(deps, input.jobId);
    if (job.status !== 'queued') return { ok: true };
    const connection = await loadConnection(deps, job.orgId, input.candidate.connectionId);
    const adapter = adapterFor(connection.kind);
    const key = submitKey(input.jobId, input.candidateIndex);
    const context = Context.current();
    const markRunning = async (providerJobId: string) => {
      const now = deps.clock.now();
      await deps.db.update(jobs).set({
        status: 'running', route: input.candidate.position, provider: connection.kind, connectionId: input.candidate.connectionId,
        model: servedModel(job, input.candidate), providerJobId, submitIntent: null, startedAt: now, updatedAt: now,
      }).where(and(eq(jobs.id, input.jobId), eq(jobs.status, 'queued')));
      return { ok: true as const };
    };
    const earlier = acceptedEarlier(context.info.heartbeatDetails, key);
    if (earlier) return markRunning(earlier);
    if (job.submitIntent !== null && !(adapter.deduplicatesSubmits && job.submitIntent === key)) {
      return { ok: false, outcomeUnknown: true, failure: { kind: 'timeout', message: 'an earlier submit attempt ended before the provider\'s answer was recorded', outcomeUnknown: true } };
    }
    if (job.submitIntent === null) {
      const [marked] = await deps.db.update(jobs).set({ submitIntent: key }).where(and(eq(jobs.id, input.jobId), eq(jobs.status, 'queued'), isNull(jobs.submitIntent))).returning({ id: jobs.id });
      // Another attempt (a stale one still running) got there first: its outcome is unknown here.
      if (!marked) return { ok: false, outcomeUnknown: true, failure: { kind: 'timeout', message: 'another submit attempt for this job is in flight', outcomeUnknown: true } };
    }
    const request = job.request as VideoRequest;
    // The length is always asked, so what renders is what was held (core/jobs/video-cost.ts).
    const call = adapter.submit({ model: input.candidate.upstreamModel, prompt: request.prompt, durationSeconds: plannedSeconds(adapter, request.duration_seconds), seed: request.seed, extra: request.extra ?? {} });
    const accepted = await heartbeating(VIDEO_CALL_TIMEOUT_MS * 2, async (signal) => {
      const sent = await sendUpstream(deps.agent, adapter, connection.target, { ...call, headers: { 'idempotency-key': key }, sendOnce: true }, signal);
      return sent.ok ? { ok: true as const, ...adapter.parseSubmit(await sent.body.json()) } : sent;
    });
    if (!accepted.ok) {
      const { failure } = accepted;
      // The provider may have taken it (no answer, or the connection cut after the body went):
      // the intent stays, and only the same provider, with the same key, may be asked again.
      if (failure.kind === 'timeout' || ('outcomeUnknown' in failure && failure.outcomeUnknown)) {
        if (adapter.deduplicatesSubmits) throw ApplicationFailure.retryable(`the submit's outcome is unknown (${failure.message}); asking ${input.candidate.connectionId} again with the same Idempotency-Key`, SUBMIT_OUTCOME_UNKNOWN);
        return { ok: false, failure, outcomeUnknown: true };
      }
      // A refusal is an answer: no render started, the next submit may be sent.
      await deps.db.update(jobs).set({ submitIntent: null }).where(and(eq(jobs.id, input.jobId), eq(jobs.submitIntent, key)));
      return { ok: false, failure };
    }
    // The render's id reaches the server before anything else can fail: a retry of this
    // attempt finds it in the heartbeat details and records it without sending again.
    const beat: SubmitHeartbeat = { submitAccepted: { key, providerJobId: accepted.providerJobId } };
    onAccepted(beat);
    context.heartbeat(beat);
    await deps.afterSubmitAccepted?.(input.jobId);
    return markRunning(accepted.providerJobId);
  }

  return {
    /**
     * Makes sure the job's row exists. The API writes it right after starting the workflow;
     * if the API died in between, this first step writes it, so no started job goes unseen.
     */
    async recordJob(input: { job: NewJobRecord; refusedStartGraceMs?: number }): Promise<{ abandoned?: true } | void> {
      // A start the API gave up on (it answered 503 and released the hold) whose request reached
      // Temporal all the same: no row, the reservation released. The client may retry with its
      // Idempotency-Key, which reserves again and resumes this very job: such a run waits out a
      // grace for that, then ends without submitting anything (issue 55).
      const [row] = await deps.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.id, input.job.id));
      if (!row) {
        const [ledger] = await deps.db.select({ state: spendLedger.state }).from(spendLedger).where(eq(spendLedger.jobId, input.job.id));
        if (ledger?.state === 'released') {
          const waitMs = Date.parse(input.job.createdAt) + (input.refusedStartGraceMs ?? REFUSED_START_GRACE_MS) - deps.clock.now().getTime();
          if (waitMs <= 0) return { abandoned: true };
          throw ApplicationFailure.create({ type: 'RefusedStart', category: ApplicationFailureCategory.BENIGN, message: 'the API refused this start; waiting for a retry with its Idempotency-Key', nextRetryDelay: Math.min(5_000, waitMs) });
        }
      }
      await deps.db.insert(jobs).values(jobRowOf(input.job)).onConflictDoNothing();
    },

    /**
     * Submits the render to one candidate, at most once (issue 55). The intent (the submit's
     * Idempotency-Key, `<job id>-<candidate index>`) is written to the job's row before the
     * send and cleared by the provider's answer: a refusal clears it, acceptance moves the job
     * to `running`. An attempt that finds an intent left by an earlier one (its worker lost, a
     * stop past the grace period, a 2xx it could not parse, a failed `running` write, the outer
     * abort) does not know whether the provider took the render: it sends again only to a
     * provider that de-duplicates by the key, else answers `outcomeUnknown`, and the workflow
     * fails the job with its worst case still charged. One exception needs no guess: an
     * attempt that got the provider's acceptance heartbeats the render's id first, and the
     * retry that finds it there records the render without sending. Provider refusals are
     * answers, not exceptions: the workflow decides what to try next.
     */
    async submitVideo(input: { jobId: string; candidateIndex: number; candidate: VideoCandidate }): Promise<{ ok: true } | { ok: false; failure: ProviderFailure; outcomeUnknown?: true }> {
      // Beating from the start: the reads and the intent's write before the send must not look
      // like a lost worker to the heartbeat timeout (which would fail the job as unknown).
      let beatDetails: SubmitHeartbeat | undefined;
      return beatingThroughout(() => submitOnce(input, (accepted) => (beatDetails = accepted)), () => beatDetails);
    },

    /** One status check (`checkOnce`): the workflow's own loop of checks, which runs started before `awaitRender` still use. */
    async checkVideo(input: { jobId: string }): Promise<{ state: 'running' } | RenderOutcome> {
      const check = await beatingThroughout(async () => checkOnce(await loadJob(deps, input.jobId)));
      return check.state === 'running' ? { state: 'running' } : check;
    },

    /**
     * Waits for the render to finish, one status check per attempt (Temporal's pattern for
     * infrequent polling): while the render runs, the attempt fails with `RenderRunning` and a
     * `nextRetryDelay` from `checkIntervalsMs`, so the server, not the workflow, keeps the
     * schedule, and a 60-check job writes a handful of history events instead of hundreds.
     * Checks are counted in `jobs.status_checks`; an attempt that fails before the provider
     * answered (Postgres away, a lost worker) spends none and is retried by the policy's own
     * backoff. The check that reaches the schedule's length without a final answer fails with
     * `StatusChecksExhausted`, not retryable.
     */
    async awaitRender(input: { jobId: string; checkIntervalsMs: number[] }): Promise<RenderOutcome> {
      return beatingThroughout(() => awaitRenderOnce(input));
    },

    /**
     * Copies the output to storage, then marks the job succeeded with usage and its event. The
     * cost is what was rendered: the seconds and variant held at submit (never the answer's
     * figure, which Veo does not give), priced by the names the hold priced.
     */
    async completeVideo(input: { jobId: string; modelId: string; upstreamModel?: string; retentionMs: number; durationSeconds: number | null; resolution: string | null; aspectRatio: string | null; mimeType: string; download: string }): Promise<{ status: string; expiresAt: string | null }> {
      const job = await loadJob(deps, input.jobId);
      if (job.status !== 'running') {
        // A retry after the move committed: its events may still need their deliveries started.
        await endJobHold(deps.db, deps.redis.redis, job.id);
        await deps.startDeliveries(await pendingJobDeliveries(deps.db, job.id));
        return { status: job.status, expiresAt: job.expiresAt?.toISOString() ?? null };
      }
      const connection = await loadConnection(deps, job.orgId, job.connectionId!);
      const adapter = adapterFor(connection.kind);
      const download = adapter.content(job.providerJobId!, input.download);
      // Checked again here, before any fetch: nothing handed out by a provider reaches a private address.
      const refused = await refusedDownload(download.path, connection.target.baseUrls);
      if (refused) throw ApplicationFailure.nonRetryable(`the provider's download URL is refused: ${refused}`, 'DownloadRefused');
      const storageKey = `jobs/${job.id}/output.mp4`;
      const { bytes } = await heartbeating(VIDEO_CALL_TIMEOUT_MS * 5, async (signal) => {
        const sent = await sendUpstream(deps.agent, adapter, connection.target, download, signal);
        if (!sent.ok) throw new Error(`downloading the output failed: ${sent.failure.kind}`);
        return deps.storage.put(storageKey, sent.body);
      });
      const request = job.request as VideoRequest;
      const extra = request.extra ?? {};
      const models = [job.model, input.modelId, ...(input.upstreamModel ? [input.upstreamModel] : [])];
      const { seconds, price } = await videoJobPrice(deps.db, { orgId: job.orgId, kind: connection.kind, adapter, models, durationSeconds: request.duration_seconds, extra });
      const asked = adapter.requestedLook(extra);
      const now = deps.clock.now();
      const expiresAt = new Date(now.getTime() + input.retentionMs);
      const { row, moved, deliveries } = await finishJob(deps.db, job.id, 'succeeded', {
        progress: 1,
        output: {
          storage_key: storageKey, duration_seconds: input.durationSeconds ?? seconds, resolution: input.resolution ?? asked.resolution ?? 'unknown',
          aspect_ratio: input.aspectRatio ?? asked.aspectRatio ?? 'unknown', mime_type: input.mimeType, bytes,
        },
        usage: { seconds, ...(price ? { cost: price.cost, price_source: price.source } : { cost: null }) },
        ...allocationColumns(await allocateJob(deps.db, job, price ? price.cost : null)),
        completedAt: now,
        expiresAt,
      }, now, deps.links);
      // A cancel recorded while the copy ran won (the first terminal write does): the file it
      // copied belongs to no job and would never be deleted by retention (issue 55).
      if (!moved && row.status !== 'succeeded') await deps.storage.remove(storageKey);
      // The settled cost joins the key's spend that chat requests are checked against.
      // The hold ends as the ledger row now says (settled at the cost, or released when unpriced).
      // Settling is idempotent, so a retry after the move committed still ends the hold.
      await endJobHold(deps.db, deps.redis.redis, job.id);
      await deps.startDeliveries(deliveries);
      return { status: row.status, expiresAt: row.expiresAt?.toISOString() ?? null };
    },

    /**
     * Ends the job `failed` (no cost) or `canceled`, with its event; a terminal job stays as it
     * is. When no target accepted the submit, the error is the one a synchronous request would
     * get after the same refusals (spec 7).
     */
    async endJob(input: { jobId: string; status: 'failed' | 'canceled'; error?: JobError; submitRefusals?: SubmitRefusal[] }): Promise<{ status: string }> {
      const error = input.submitRefusals ? submitError(input.submitRefusals) : input.error ?? null;
      const { row } = await endJobUnpaid({ db: deps.db, spendRedis: deps.redis.redis, links: deps.links, startDeliveries: deps.startDeliveries }, input.jobId, input.status, error, deps.clock.now());
      return { status: row.status };
    },

    /** 24 hours after completion: the file is deleted and the job no longer shows an output. */
    async expireJobOutput(input: { jobId: string }): Promise<void> {
      const job = await loadJob(deps, input.jobId);
      if (job.output) await deps.storage.remove(job.output.storage_key);
      await deps.db.update(jobs).set({ output: null, expiresAt: null, updatedAt: deps.clock.now() }).where(eq(jobs.id, input.jobId));
    },
  };
}

export type VideoJobActivities = ReturnType<typeof createVideoJobActivities>;
