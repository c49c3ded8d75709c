import type Router from '@koa/router';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { and, asc, desc, eq, gt, inArray, lt, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import { keyReach } from '../../core/auth/key-reach';
import { BATCH_ENDPOINTS } from '../../core/batches/input-lines';
import { presentOpenAIBatch, type BatchRow } from '../../core/batches/present';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { batches, files, TERMINAL_BATCH_STATUSES } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import { errorSummary } from '../../core/logger';
import { BATCH_CANCEL_SIGNAL, BATCH_CHUNK_ITEMS, BATCH_CHUNKS_PER_RUN, BATCH_ITEM_CONCURRENCY, scaledInfraRetry, searchAttributeKeys, taskQueue, workflowIds, type BatchRunInput } from '../../workflows/definitions';
import { withTemporalDeadline } from '../temporal-client';
import type { GatewayContext, GatewayState } from '../context';
import { parseInput } from '../validation';
import { fileVisibility, openAIList, openAIListQuery, unknownFile } from './files';
import type { JobServices } from './jobs';

/** OpenAI's one completion window. */
const COMPLETION_WINDOW_MS = { '24h': 24 * 3_600_000 } as const;

/** OpenAI's metadata bounds: 16 pairs, keys up to 64 characters, values up to 512. */
const metadataSchema = z.record(z.string().max(64), z.string().max(512)).refine((m) => Object.keys(m).length <= 16, 'at most 16 pairs').nullable().optional();

export const batchCreateSchema = z.looseObject({
  input_file_id: z.string().min(1).max(128),
  endpoint: z.enum(BATCH_ENDPOINTS),
  completion_window: z.literal('24h'),
  metadata: metadataSchema,
});

/** A key reads the batches within its reach, as it reads jobs (core/auth/key-reach.ts). */
function visibility(key: KeyContext): SQL {
  const reach = keyReach(key);
  return and(eq(batches.orgId, reach.orgId), reach.lineageId === null ? undefined : eq(batches.lineageId, reach.lineageId))!;
}

const unknownBatch = (id: string) => new GatewayError('resource_not_found', `No batch \`${id}\` within this key's reach.`);


/**
 * OpenAI's Batch API (issue 56): a batch of requests from an uploaded JSONL file, run by the
 * `batchRun` workflow on the jobs queue. Every item goes through the gateway's own request path.
 */
export function batchRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock; jobs: JobServices }): void {
  async function visibleBatch(ctx: GatewayContext, id: string): Promise<BatchRow> {
    const [row] = await deps.db.select().from(batches).where(and(eq(batches.id, id), visibility(ctx.state.key!)));
    if (!row) throw unknownBatch(id);
    return row;
  }

  router.post('/batches', async (ctx) => {
    const key = ctx.state.key!;
    const input = parseInput(batchCreateSchema, ctx.state.body);
    const [file] = await deps.db.select().from(files).where(and(eq(files.id, input.input_file_id), fileVisibility(key)));
    if (!file) throw unknownFile(input.input_file_id);
    if (file.purpose !== 'batch') throw new GatewayError('invalid_request', `File \`${file.id}\` was not uploaded with \`purpose: batch\`.`);
    const now = deps.clock.now();
    const row: typeof batches.$inferInsert = {
      id: newId('batch', now.getTime()),
      orgId: key.orgId, keyId: key.keyId, lineageId: key.lineageId, projectId: key.projectId,
      wire: 'openai', endpoint: input.endpoint, inputFileId: file.id, completionWindow: input.completion_window,
      metadata: input.metadata ?? null, chunkItems: deps.jobs.batches?.chunkItems ?? BATCH_CHUNK_ITEMS,
      createdAt: now, updatedAt: now,
      expiresAt: new Date(now.getTime() + Math.round(COMPLETION_WINDOW_MS[input.completion_window] * deps.jobs.scheduleScale)),
    };
    const [created] = await deps.db.insert(batches).values(row).returning();
    const workflowInput: BatchRunInput = {
      batchId: created!.id, orgId: key.orgId,
      concurrency: deps.jobs.batches?.itemConcurrency ?? BATCH_ITEM_CONCURRENCY,
      chunksPerRun: deps.jobs.batches?.chunksPerRun ?? BATCH_CHUNKS_PER_RUN,
      retryMs: scaledInfraRetry(deps.jobs.scheduleScale),
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
        // Refused: nothing runs, so nothing is shown (a batch that never started is no batch).
        await deps.db.delete(batches).where(eq(batches.id, created!.id));
        throw err;
      }
    }
    ctx.body = presentOpenAIBatch(created!);
  });

  router.get('/batches/:id', async (ctx) => {
    ctx.body = presentOpenAIBatch(await visibleBatch(ctx, ctx.params.id!));
  });

  router.get('/batches', async (ctx) => {
    const page = openAIListQuery(ctx.query, 20, 100);
    const rows = await deps.db.select().from(batches)
      .where(and(
        visibility(ctx.state.key!),
        eq(batches.wire, 'openai'),
        page.after ? (page.order === 'desc' ? lt(batches.id, page.after) : gt(batches.id, page.after)) : undefined,
      ))
      .orderBy(page.order === 'desc' ? desc(batches.id) : asc(batches.id))
      .limit(page.limit + 1);
    ctx.body = openAIList(rows.map(presentOpenAIBatch), page.limit);
  });

  /**
   * `POST /v1/batches/{id}/cancel`: the batch moves to `cancelling` at once and its run is told;
   * items in flight finish and are kept, no new one starts, and the run ends it `cancelled`.
   */
  router.post('/batches/:id/cancel', async (ctx) => {
    const row = await visibleBatch(ctx, ctx.params.id!);
    if ((TERMINAL_BATCH_STATUSES as readonly string[]).includes(row.status)) throw new GatewayError('invalid_request', `Batch \`${row.id}\` is already ${row.status}.`);
    const now = deps.clock.now();
    const [moved] = await deps.db.update(batches).set({ status: 'cancelling', cancellingAt: now, updatedAt: now })
      .where(and(eq(batches.id, row.id), inArray(batches.status, ['validating', 'in_progress']))).returning();
    if (moved) {
      // Not awaited: the run reads `cancelling` before each wave of items even without the signal.
      void withTemporalDeadline(deps.jobs.temporal, () => deps.jobs.temporal.workflow.getHandle(workflowIds.batchRun(row.id)).signal(BATCH_CANCEL_SIGNAL)).catch((err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) ctx.state.log?.warn({ batch_id: row.id, err: errorSummary(err) }, 'the batch\'s run was not told of its cancel; it sees it before its next items');
      });
    }
    const [after] = await deps.db.select().from(batches).where(eq(batches.id, row.id));
    ctx.body = presentOpenAIBatch(after!);
  });
}
