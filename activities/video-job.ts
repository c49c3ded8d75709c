import { and, eq, sql } from 'drizzle-orm';
import type { Agent } from 'undici';
import { ApplicationFailure } from '@temporalio/activity';
import type { Clock } from '../core/clock';
import type { Sealer } from '../core/crypto/sealing';
import type { Database } from '../core/db/client';
import { videoPrice } from '../core/budgets/job-spend';
import { recordKeySpend } from '../core/budgets/key-spend';
import type { RedisHandle } from '../core/redis';
import { jobs, providerConnections, type JobError } from '../core/db/schema';
import { finalError } from '../core/chat/outcome';
import { finishJob, jobRowOf, type JobLinks, type NewJobRecord } from '../core/jobs/job-store';
import type { Candidate } from '../core/routing/candidates';
import { isProviderKind, type ProviderKind } from '../core/providers/kinds';
import { openConnection } from '../core/providers/open-connection';
import { sendUpstream, type UpstreamTarget } from '../core/providers/upstream';
import type { ProviderFailure } from '../core/providers/types';
import { VIDEO_ADAPTERS } from '../core/providers/video';
import type { OutputStorage } from '../core/storage/output-storage';
import type { VideoCandidate } from '../workflows/definitions';

export type VideoJobDeps = { db: Database; redis: RedisHandle; clock: Clock; sealer: Sealer; storage: OutputStorage; agent: Agent; links: JobLinks };

/** Calls to a provider's video API wait this long for an answer. */
const VIDEO_CALL_TIMEOUT_MS = 60_000;

type Connection = { kind: ProviderKind; target: UpstreamTarget };

async function loadConnection(deps: VideoJobDeps, orgId: string, connectionId: string): Promise<Connection> {
  const [c] = await deps.db.select().from(providerConnections).where(and(eq(providerConnections.orgId, orgId), eq(providerConnections.id, connectionId)));
  if (!c || !isProviderKind(c.kind)) throw ApplicationFailure.nonRetryable(`connection ${connectionId} is gone`, 'ConnectionGone');
  const opened = openConnection(c, deps.sealer);
  return {
    kind: c.kind,
    target: { kind: c.kind, baseUrls: [opened.baseUrl, ...c.alternateBaseUrls], secrets: opened.secrets, timeoutMs: c.timeoutMs ?? VIDEO_CALL_TIMEOUT_MS },
  };
}

async function loadJob(deps: VideoJobDeps, jobId: string) {
  const [job] = await deps.db.select().from(jobs).where(eq(jobs.id, jobId));
  if (!job) throw ApplicationFailure.nonRetryable(`job ${jobId} does not exist`, 'JobGone');
  return job;
}

function adapterFor(kind: ProviderKind) {
  const adapter = VIDEO_ADAPTERS[kind];
  if (!adapter) throw ApplicationFailure.nonRetryable(`kind ${kind} renders no video`, 'NoVideoAdapter');
  return adapter;
}

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
  return {
    /**
     * Makes sure the job's row exists. The API writes it right after starting the workflow;
     * if the API died in between, this first step writes it, so no started job goes unseen.
     */
    async recordJob(input: { job: NewJobRecord }): Promise<void> {
      await deps.db.insert(jobs).values(jobRowOf(input.job)).onConflictDoNothing();
    },

    /**
     * Submits the render to one candidate. The provider is asked with an Idempotency-Key of the
     * job and candidate, so a retried activity cannot start a second render. Acceptance moves
     * the job to `running` in the same step. Provider refusals are answers, not exceptions:
     * the workflow decides what to try next.
     */
    async submitVideo(input: { jobId: string; candidateIndex: number; candidate: VideoCandidate }): Promise<{ ok: true } | { ok: false; failure: ProviderFailure }> {
      const job = await loadJob(deps, input.jobId);
      if (job.status !== 'queued') return { ok: true };
      const connection = await loadConnection(deps, job.orgId, input.candidate.connectionId);
      const adapter = adapterFor(connection.kind);
      const request = job.request as { prompt: string; duration_seconds?: number; seed?: number; extra?: Record<string, unknown> };
      const call = adapter.submit({ model: input.candidate.upstreamModel, prompt: request.prompt, durationSeconds: request.duration_seconds, seed: request.seed, extra: request.extra ?? {} });
      const sent = await sendUpstream(deps.agent, adapter, connection.target, { ...call, headers: { 'idempotency-key': `${input.jobId}-${input.candidateIndex}` } }, AbortSignal.timeout(VIDEO_CALL_TIMEOUT_MS * 2));
      if (!sent.ok) return { ok: false, failure: sent.failure };
      const { providerJobId } = adapter.parseSubmit(await sent.body.json());
      const now = deps.clock.now();
      await deps.db.update(jobs).set({
        status: 'running', route: input.candidate.position, provider: connection.kind, connectionId: input.candidate.connectionId,
        model: input.candidate.upstreamModel, providerJobId, startedAt: now, updatedAt: now,
      }).where(and(eq(jobs.id, input.jobId), eq(jobs.status, 'queued')));
      return { ok: true };
    },

    /** One status check: progress is written as the provider reports it; no answer counts as still running. */
    async checkVideo(input: { jobId: string }): Promise<{ state: 'running' } | { state: 'succeeded'; durationSeconds: number | null; resolution: string | null; aspectRatio: string | null; mimeType: string; download: string } | { state: 'failed'; error: JobError }> {
      const job = await loadJob(deps, input.jobId);
      if (job.status !== 'running' || !job.connectionId || !job.providerJobId) return { state: 'running' };
      const connection = await loadConnection(deps, job.orgId, job.connectionId);
      const adapter = adapterFor(connection.kind);
      const sent = await sendUpstream(deps.agent, adapter, connection.target, adapter.status(job.providerJobId), AbortSignal.timeout(VIDEO_CALL_TIMEOUT_MS * 2));
      await deps.db.update(jobs).set({ statusChecks: sql`${jobs.statusChecks} + 1` }).where(eq(jobs.id, input.jobId));
      if (!sent.ok) return { state: 'running' };
      const status = adapter.parseStatus(await sent.body.json(), job.providerJobId);
      if (status.state === 'running') {
        if (status.progress !== null) await deps.db.update(jobs).set({ progress: status.progress, updatedAt: deps.clock.now() }).where(and(eq(jobs.id, input.jobId), eq(jobs.status, 'running')));
        return { state: 'running' };
      }
      if (status.state === 'failed') return { state: 'failed', error: { message: `The provider failed to render the video: ${status.message}`, type: 'upstream_error', code: null } };
      return status;
    },

    /** Copies the output to storage, then marks the job succeeded with usage and its event. */
    async completeVideo(input: { jobId: string; modelId: string; retentionMs: number; durationSeconds: number | null; resolution: string | null; aspectRatio: string | null; mimeType: string; download: string }): Promise<{ status: string; expiresAt: string | null }> {
      const job = await loadJob(deps, input.jobId);
      if (job.status !== 'running') return { status: job.status, expiresAt: job.expiresAt?.toISOString() ?? null };
      const connection = await loadConnection(deps, job.orgId, job.connectionId!);
      const adapter = adapterFor(connection.kind);
      const sent = await sendUpstream(deps.agent, adapter, connection.target, adapter.content(job.providerJobId!, input.download), AbortSignal.timeout(VIDEO_CALL_TIMEOUT_MS * 5));
      if (!sent.ok) throw new Error(`downloading the output failed: ${sent.failure.kind}`);
      const storageKey = `jobs/${job.id}/output.mp4`;
      const { bytes } = await deps.storage.put(storageKey, sent.body);
      const request = job.request as { duration_seconds?: number };
      const seconds = input.durationSeconds ?? request.duration_seconds ?? 0;
      const now = deps.clock.now();
      const expiresAt = new Date(now.getTime() + input.retentionMs);
      const price = await videoPrice(deps.db, job.orgId, connection.kind, [job.model, input.modelId], seconds);
      const { row, moved } = await finishJob(deps.db, job.id, 'succeeded', {
        progress: 1,
        output: { storage_key: storageKey, duration_seconds: seconds, resolution: input.resolution ?? 'unknown', aspect_ratio: input.aspectRatio ?? 'unknown', mime_type: input.mimeType, bytes },
        usage: { seconds, ...(price ? { cost: price.cost, price_source: price.source } : { cost: null }) },
        completedAt: now,
        expiresAt,
      }, now, deps.links);
      // The settled cost joins the key's spend that chat requests are checked against.
      if (moved && price) await recordKeySpend(deps.redis, job.lineageId, price.cost, now);
      return { status: row.status, expiresAt: row.expiresAt?.toISOString() ?? null };
    },

    /**
     * Ends the job `failed` (no cost) or `canceled`, with its event; a terminal job stays as it
     * is. When no target accepted the submit, the error is the one a synchronous request would
     * get after the same refusals (spec 7).
     */
    async endJob(input: { jobId: string; status: 'failed' | 'canceled'; error?: JobError; submitRefusals?: SubmitRefusal[] }): Promise<{ status: string }> {
      const error = input.submitRefusals ? submitError(input.submitRefusals) : input.error ?? null;
      // No cost is recorded for failed or canceled jobs: finishJob gives their reservation back.
      const { row } = await finishJob(deps.db, input.jobId, input.status, { error, usage: null }, deps.clock.now(), deps.links);
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
