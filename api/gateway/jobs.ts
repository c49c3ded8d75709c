import type Router from '@koa/router';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, WorkflowUpdateStage, type Client } from '@temporalio/client';
import { and, eq, inArray, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import { withinReach } from '../../core/auth/key-reach';
import { closeJobSpend, endJobHold, reserveJobSpend } from '../../core/spend/job-spend';
import { spendScopes } from '../../core/spend/scopes';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { JOB_EVENT_TYPES, jobs, spendLedger } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import { afterCursor, keysetOrder, pageOf, readPage, type Keyset } from '../../core/paging';
import { withIdempotency, type Checkpoint, type IdempotencyClaim } from '../../core/idempotency';
import { isTerminal, jobRowOf, jobStatusFilter, type JobLinks, type JobRow, type NewJobRecord } from '../../core/jobs/job-store';
import { presentJob } from '../../core/jobs/present';
import { videoJobPrice } from '../../core/jobs/video-cost';
import { videoParameters } from '../../core/jobs/video-request';
import { OUTPUT_RETENTION_MS, statusCheckSchedule } from '../../core/jobs/schedule';
import { VIDEO_ADAPTERS } from '../../core/providers/video';
import { chainPosition, planCandidates } from '../../core/routing/candidates';
import { JOB_CANCEL_SIGNAL, JOB_CANCEL_UPDATE, scaledInfraRetry, searchAttributeKeys, taskQueue, workflowIds, type JobCancelResult, type VideoJobInput } from '../../workflows/definitions';
import { createDeliveryStarter, deliveryStartOptions } from '../../activities/webhook-dispatch';
import { endJobUnpaid } from '../../core/jobs/end-job';
import { errorSummary } from '../../core/logger';
import { withinTrace } from '../../core/observability/tracing';
import { withTemporalDeadline } from '../temporal-client';
import type { GatewayContext, GatewayState } from '../context';
import { parseInput, modelName } from '../validation';
import type { GatewayServices } from './services';

/** A cancel waits this long for a worker to take its Update, then records the cancel in Postgres. */
export const CANCEL_ACCEPT_DEADLINE_MS = 2_500;
/**
 * An accepted cancel's answer: immediate, unless a completion under way is finishing (its
 * download). It waited a minute (62.5 s in all, issue 55); now a cancel answers within 5 s
 * whatever the worker does: a completion not done by then loses to the cancel recorded in
 * Postgres, and drops the file it copied (`completeVideo`).
 */
const CANCEL_RESULT_DEADLINE_MS = 2_500;

/** What the job endpoints need besides the chat services. */
export type JobServices = {
  temporal: Client; links: Omit<JobLinks, 'baseUrl'> & { baseUrl: string | null }; scheduleScale: number; taskQueuePrefix: string;
  /** How a batch's run is cut up (GW_BATCH_*, issue 56); absent: the defaults in workflows/definitions.ts. */
  batches?: { itemConcurrency: number; chunkItems: number; chunksPerRun: number };
};

export const VIDEO_JOB_TYPE = 'video.generation';

const videoRequestSchema = z.looseObject({
  model: modelName,
  prompt: z.string().min(1).max(32_000),
  duration_seconds: z.number().positive().max(600).optional(),
  seed: z.number().int().optional(),
  webhook: z.strictObject({
    url: z.string().max(2048),
    events: z.array(z.enum(JOB_EVENT_TYPES)).min(1).max(3).optional(),
  }).optional(),
});

function checkWebhookUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new GatewayError('invalid_request', 'Invalid `webhook.url`: it is not a URL.');
  }
  // Spec 4.2: plain HTTP is refused at submit; private addresses are refused at send time.
  if (url.protocol !== 'https:') throw new GatewayError('invalid_request', 'Invalid `webhook.url`: it must use https.');
  return raw;
}

/**
 * Spec 4.2 rule 1: a key reads the jobs within its reach, as its request log (core/auth/key-reach.ts):
 * its own lineage's, or the organization's with `observability_access: organization`.
 */
function visibility(key: KeyContext): SQL {
  return withinReach(key, jobs);
}

/** Spec 4.2: `limit` 1 to 100, default 20. */
const JOB_PAGE_SIZE = 20;
const JOB_ORDER: Keyset = { key: jobs.id, id: jobs.id, order: 'desc', type: 'text' };

const unknownJob = (id: string) => new GatewayError('invalid_request', `No job \`${id}\` within this key's reach.`);

export function jobRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock; gateway: GatewayServices; jobs: JobServices }): void {
  const linksFor = (ctx: GatewayContext): JobLinks => ({ signer: deps.jobs.links.signer, baseUrl: deps.jobs.links.baseUrl ?? `${ctx.protocol}://${ctx.host}` });

  async function visibleJob(ctx: GatewayContext, id: string): Promise<JobRow> {
    const [row] = await deps.db.select().from(jobs).where(and(eq(jobs.id, id), visibility(ctx.state.key!)));
    if (!row) throw unknownJob(id);
    return row;
  }

  /** `POST /v1/videos` (spec 4.2): 202 with the job `queued` once its workflow has started. */
  router.post('/videos', async (ctx) => {
    const key = ctx.state.key!;
    const input = parseInput(videoRequestSchema, ctx.state.body);
    // Refuses a field that would change the bill behind the hold's back; keeps the wires' own.
    const extra = videoParameters(input);
    const webhook = input.webhook ? { url: checkWebhookUrl(input.webhook.url), events: input.webhook.events ?? [...JOB_EVENT_TYPES] } : null;
    const config = await deps.gateway.orgConfig.get(key.orgId);
    const plan = planCandidates({ model: input.model, fallbacks: [], key, config, catalog: deps.gateway.catalog });
    const candidates = plan.candidates.filter((c) => VIDEO_ADAPTERS[c.connection.kind]);
    if (candidates.length === 0) throw new GatewayError('no_provider_connected', `No connected provider renders video for \`${input.model}\`.`);
    const now = deps.clock.now();

    /** `resumed`: the input a first request with this Idempotency-Key checkpointed (its job id). */
    const perform = async (claim?: IdempotencyClaim, resumed?: VideoJobInput) => {
      const job: NewJobRecord = resumed?.job ?? {
        id: newId('job'),
        orgId: key.orgId,
        keyId: key.keyId,
        lineageId: key.lineageId,
        projectId: key.projectId,
        type: VIDEO_JOB_TYPE,
        model: input.model,
        routeSlug: plan.route?.slug ?? null,
        request: { prompt: input.prompt, duration_seconds: input.duration_seconds, seed: input.seed, extra },
        webhook,
        createdAt: now.toISOString(),
      };
      const workflowInput: VideoJobInput = resumed ?? {
        jobId: job.id,
        orgId: key.orgId,
        job,
        candidates: candidates.map((c, i) => ({ connectionId: c.connection.id, kind: c.connection.kind, upstreamModel: c.upstreamModel, modelId: c.modelId, position: chainPosition(i) })),
        failover: plan.failover,
        maxRetries: plan.maxRetries,
        checkIntervalsMs: statusCheckSchedule(deps.jobs.scheduleScale),
        retentionMs: Math.round(OUTPUT_RETENTION_MS * deps.jobs.scheduleScale),
        retryMs: scaledInfraRetry(deps.jobs.scheduleScale),
      };
      // The estimated cost is held against the key's limit before anything starts: the dearest
      // candidate submit may fail over to, and unpriced if any of them is. Each is priced as
      // its completion will be (core/jobs/video-cost.ts): the same seconds, the same variant.
      const prices = await Promise.all(candidates.map(async (c) => (await videoJobPrice(deps.db, {
        orgId: key.orgId, kind: c.connection.kind, adapter: VIDEO_ADAPTERS[c.connection.kind]!, models: [input.model, c.modelId, c.upstreamModel],
        durationSeconds: job.request.duration_seconds as number | undefined, extra: (job.request.extra ?? {}) as Record<string, unknown>,
      })).price));
      const priced = prices.filter((p) => p !== null);
      // A resumed job keeps the reservation it holds; one given back when its start failed is taken again.
      const [ledger] = resumed ? await deps.db.select({ state: spendLedger.state }).from(spendLedger).where(eq(spendLedger.jobId, job.id)) : [];
      if (ledger?.state === 'released') await deps.db.delete(spendLedger).where(and(eq(spendLedger.jobId, job.id), eq(spendLedger.state, 'released')));
      if (!ledger || ledger.state === 'released') {
        await reserveJobSpend(deps.db, deps.gateway.spend, {
          orgId: key.orgId, lineageId: key.lineageId, projectId: key.projectId, memberId: key.createdByMemberId, jobId: job.id,
          estimate: priced.length > 0 ? Math.max(...priced.map((p) => p.cost)) : null, unpriced: priced.length < prices.length,
          scopes: spendScopes(key, config, [], now), unpricedBudgetPolicy: config.unpricedBudgetPolicy, now,
        });
      }
      // The workflow first, then the row: a started workflow records its own row if we die here.
      try {
        // The job id is recorded before the start: a retry after any later failure resolves to it.
        await claim?.checkpoint({ job_id: job.id, input: workflowInput });
        // Traced: the start is a span of the request, and the workflow's spans join its trace.
        await withTemporalDeadline(deps.jobs.temporal, () => withinTrace(ctx.state.trace, () => deps.jobs.temporal.workflow.start('videoJob', {
          workflowId: workflowIds.videoJob(job.id),
          taskQueue: taskQueue('jobs', deps.jobs.taskQueuePrefix),
          args: [workflowInput],
          typedSearchAttributes: [
            { key: searchAttributeKeys.orgId, value: key.orgId },
            { key: searchAttributeKeys.keyId, value: key.keyId },
            { key: searchAttributeKeys.jobStatus, value: 'queued' },
            { key: searchAttributeKeys.model, value: input.model },
          ],
        })));
      } catch (err) {
        // Already started (a retry resumed this job while this request was on its way): record it.
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
          // Refused: the hold is given back at once (issue 55), so a key does not stay blocked
          // for the hold's lease by submits that never ran. A start whose answer was lost may
          // have started the workflow all the same: its first step finds no job row and the
          // reservation released, waits a minute for a retry with this Idempotency-Key (which
          // reserves again and goes on with it), else ends without submitting (`recordJob`).
          await closeJobSpend(deps.db, job.id, 'released', now);
          await endJobHold(deps.db, deps.gateway.spendRedis.redis, job.id);
          throw err;
        }
      }
      const [row] = await deps.db.insert(jobs).values(jobRowOf(job)).onConflictDoNothing().returning();
      const [stored] = row ? [row] : await deps.db.select().from(jobs).where(eq(jobs.id, job.id));
      return { status: 202, body: presentJob(stored!, linksFor(ctx)) };
    };
    /** A retry after a failure past the checkpoint: the job as stored, else start what was checkpointed. */
    const resume = async (checkpoint: Checkpoint) => {
      const [row] = await deps.db.select().from(jobs).where(and(eq(jobs.id, String(checkpoint.job_id)), eq(jobs.orgId, key.orgId)));
      return row ? { status: 202, body: presentJob(row, linksFor(ctx)) } : perform(undefined, checkpoint.input as VideoJobInput);
    };

    const idempotencyKey = ctx.get('idempotency-key');
    const answer = idempotencyKey
      ? await withIdempotency(deps.db, { orgId: key.orgId, scope: 'v1:videos', key: idempotencyKey, request: ctx.state.body ?? null, now }, perform, resume)
      : await perform();
    ctx.status = answer.status;
    ctx.body = answer.body;
  });

  router.get('/jobs/:id', async (ctx) => {
    ctx.body = presentJob(await visibleJob(ctx, ctx.params.id!), linksFor(ctx));
  });

  /** `GET /v1/jobs` (spec 4.2): newest first, filters, and a cursor that later inserts cannot shift. */
  router.get('/jobs', async (ctx) => {
    const statuses = jobStatusFilter(ctx.query.status);
    const page = readPage(ctx.query, JOB_PAGE_SIZE);
    const type = ctx.query.type as string | undefined;

    // Newest first by id (ids sort by creation time), so the indexes on (scope, id) serve each
    // page and jobs created between pages never shift the next one.
    const rows = await deps.db.select().from(jobs)
      .where(and(
        visibility(ctx.state.key!),
        statuses.length > 0 ? inArray(jobs.status, statuses) : undefined,
        type ? eq(jobs.type, type) : undefined,
        afterCursor(JOB_ORDER, page.after),
      ))
      .orderBy(...keysetOrder(JOB_ORDER))
      .limit(page.limit + 1);
    const links = linksFor(ctx);
    ctx.body = pageOf(rows, page.limit, (r) => ({ at: r.id, id: r.id }), (r) => presentJob(r, links));
  });

  /** A cancel's event deliveries start like a worker's; one that fails to start is the sweep's. */
  const startDeliveries = createDeliveryStarter(deps.jobs.temporal, deliveryStartOptions(deps.jobs.taskQueuePrefix, deps.jobs.scheduleScale));

  /**
   * `POST /v1/jobs/{id}/cancel` (spec 3.1): a job already terminal is 400. While a jobs worker
   * runs the job's workflow, the cancel is its Update, answered with how the job ended: a submit
   * or status check in flight is abandoned at once, and a completion under way is let finish (a
   * cancel that races completion answers the completed job). When no worker accepts the Update
   * within CANCEL_ACCEPT_DEADLINE_MS (none polls, or Temporal is silent), the cancel is recorded
   * in Postgres instead (the first terminal write wins) and answered at once; the workflow is
   * signalled, and one that missed the signal finds the job ended at its next step.
   */
  router.post('/jobs/:id/cancel', async (ctx) => {
    const row = await visibleJob(ctx, ctx.params.id!);
    if (isTerminal(row.status)) throw new GatewayError('invalid_request', `Job \`${row.id}\` is already ${row.status}.`);
    const log = ctx.state.log;
    const handle = deps.jobs.temporal.workflow.getHandle(workflowIds.videoJob(row.id));
    const answered = await withTemporalDeadline(deps.jobs.temporal, () => handle.startUpdate<JobCancelResult, []>(JOB_CANCEL_UPDATE, { waitForStage: WorkflowUpdateStage.ACCEPTED }), CANCEL_ACCEPT_DEADLINE_MS)
      .then((update) => withTemporalDeadline(deps.jobs.temporal, () => update.result(), CANCEL_RESULT_DEADLINE_MS))
      .then(() => true, (err: unknown) => {
        log?.info({ job_id: row.id, err: errorSummary(err) }, 'no worker took the cancel in time; recording it in Postgres');
        return false;
      });
    if (answered) {
      const [after] = await deps.db.select().from(jobs).where(eq(jobs.id, row.id));
      if (after && isTerminal(after.status)) {
        ctx.body = presentJob(after, linksFor(ctx));
        return;
      }
    }
    const { row: after, moved } = await endJobUnpaid({
      db: deps.db, spendRedis: deps.gateway.spendRedis.redis, links: linksFor(ctx),
      startDeliveries: (deliveries) => withTemporalDeadline(deps.jobs.temporal, () => startDeliveries(deliveries)).catch((err: unknown) => {
        log?.warn({ job_id: row.id, err: errorSummary(err) }, 'the cancel event\'s deliveries did not start; the delivery sweep starts them');
      }),
    }, row.id, 'canceled', null, deps.clock.now());
    if (moved) {
      // Not awaited: the answer does not wait on a Temporal that did not take the Update.
      void withTemporalDeadline(deps.jobs.temporal, () => handle.signal(JOB_CANCEL_SIGNAL)).catch((err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) log?.warn({ job_id: row.id, err: errorSummary(err) }, 'the job\'s workflow was not told of its cancel; it sees it at its next step');
      });
    }
    ctx.body = presentJob(after, linksFor(ctx));
  });
}
