import type Router from '@koa/router';
import { and, asc, desc, eq, gt, lt } from 'drizzle-orm';
import { z } from 'zod';
import { BATCH_ENDPOINTS } from '../../core/batches/input-lines';
import { presentOpenAIBatch } from '../../core/batches/present';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { batches, files } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import type { GatewayState } from '../context';
import { parseInput } from '../validation';
import { batchVisibility, cancelBatch, startBatch, visibleBatch } from './batch-runs';
import { fileVisibility, openAIList, openAIListQuery, unknownFile } from './files';
import type { JobServices } from './jobs';

/** OpenAI's metadata bounds: 16 pairs, keys up to 64 characters, values up to 512. */
const metadataSchema = z.record(z.string().max(64), z.string().max(512)).refine((m) => Object.keys(m).length <= 16, 'at most 16 pairs').nullable().optional();

export const batchCreateSchema = z.looseObject({
  input_file_id: z.string().min(1).max(128),
  endpoint: z.enum(BATCH_ENDPOINTS),
  completion_window: z.literal('24h'),
  metadata: metadataSchema,
});

/**
 * OpenAI's Batch API (issue 56): a batch of requests from an uploaded JSONL file, run by the
 * `batchRun` workflow on the jobs queue. Every item goes through the gateway's own request path.
 */
export function batchRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock; jobs: JobServices }): void {
  router.post('/batches', async (ctx) => {
    const key = ctx.state.key!;
    const input = parseInput(batchCreateSchema, ctx.state.body);
    const [file] = await deps.db.select().from(files).where(and(eq(files.id, input.input_file_id), fileVisibility(key)));
    if (!file) throw unknownFile(input.input_file_id);
    if (file.purpose !== 'batch') throw new GatewayError('invalid_request', `File \`${file.id}\` was not uploaded with \`purpose: batch\`.`);
    const created = await startBatch(deps, key, { wire: 'openai', endpoint: input.endpoint, inputFileId: file.id, completionWindow: input.completion_window, metadata: input.metadata ?? null });
    ctx.body = presentOpenAIBatch(created);
  });

  router.get('/batches/:id', async (ctx) => {
    ctx.body = presentOpenAIBatch(await visibleBatch(deps.db, ctx.state.key!, ctx.params.id!, 'openai'));
  });

  router.get('/batches', async (ctx) => {
    const page = openAIListQuery(ctx.query, 20, 100);
    const rows = await deps.db.select().from(batches)
      .where(and(
        batchVisibility(ctx.state.key!),
        eq(batches.wire, 'openai'),
        page.after ? (page.order === 'desc' ? lt(batches.id, page.after) : gt(batches.id, page.after)) : undefined,
      ))
      .orderBy(page.order === 'desc' ? desc(batches.id) : asc(batches.id))
      .limit(page.limit + 1);
    ctx.body = openAIList(rows.map(presentOpenAIBatch), page.limit);
  });

  router.post('/batches/:id/cancel', async (ctx) => {
    const row = await visibleBatch(deps.db, ctx.state.key!, ctx.params.id!, 'openai');
    ctx.body = presentOpenAIBatch(await cancelBatch(deps, row, ctx.state.log));
  });
}
