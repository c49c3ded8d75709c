import type Router from '@koa/router';
import { and, asc, eq, gt, inArray, isNotNull, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import { unixOrNull, unixSeconds } from '../../../core/clock';
import { batchEndedAt, type BatchRow } from '../../../core/batches/present';
import type { Database } from '../../../core/db/client';
import { BATCH_ITEM_OUTCOMES, BATCH_STATUSES, batches, batchItems } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { afterCursor, keysetOrder, listEnvelope, NO_NEXT_CURSOR, pageOf, readPage, timestampKey, type Keyset } from '../../../core/paging';
import { toDollars } from '../../../core/spend/money';
import { workflowIds } from '../../../workflows/definitions';
import type { GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';
import type { ManagementServices } from '../services';

/**
 * Batches as an operator reads them (issue 56): every batch of the organization, of either wire,
 * with its progress and cost, and one batch's items with each one's outcome and cost. Scope
 * `analytics:read`, data operations as jobs are (api/manage/data/jobs.ts). Never an item's
 * answer: those are in the files, for the key that made the batch.
 */
const SCOPE = 'analytics:read';
const PAGE_DEFAULT = 50;
const NEWEST_FIRST: Keyset = { key: batches.createdAt, id: batches.id, order: 'desc', type: 'timestamptz' };

const batchSchema = z.object({
  id: z.string(),
  object: z.literal('batch'),
  wire: z.enum(['openai', 'anthropic']),
  endpoint: z.string(),
  status: z.enum(BATCH_STATUSES),
  key_id: z.string(),
  project_id: z.string(),
  request_counts: z.object({ total: z.number().int(), completed: z.number().int(), failed: z.number().int(), not_run: z.number().int() }),
  progress: z.number().meta({ description: 'Items ended over items in the batch, 0 to 1.' }),
  run_by: z.enum(['gateway', 'provider']).meta({ description: 'Who runs the items: the gateway, through its own request path, or the provider, on its own batch API (at its batch price).' }),
  cost: z.number().meta({ description: 'What the items cost so far, US dollars.' }),
  rerun_count: z.number().int(),
  created_at: z.number().int(),
  ended_at: z.number().int().nullable(),
  expires_at: z.number().int(),
}).meta({ id: 'ManagedBatch' });

const itemSchema = z.object({
  line: z.number().int(),
  custom_id: z.string(),
  outcome: z.enum(BATCH_ITEM_OUTCOMES),
  status_code: z.number().int().nullable(),
  request_id: z.string().nullable(),
  cost: z.number().nullable(),
  attempts: z.number().int(),
}).meta({ id: 'ManagedBatchItem' });

const batchDetailSchema = batchSchema.extend({
  errors: z.array(z.object({ code: z.string(), message: z.string(), param: z.string().nullable(), line: z.number().int().nullable() })).nullable(),
  workflow: z.object({ id: z.string(), url: z.string().nullable() }),
}).meta({ id: 'ManagedBatchDetail' });

function presentBatch(row: BatchRow): z.infer<typeof batchSchema> {
  // A batch a provider runs is recorded when it ends; until then its progress is the provider's count.
  const ended = Math.max(row.completed + row.failed + row.unrun, row.native?.providerDone ?? 0);
  return {
    id: row.id, object: 'batch', wire: row.wire, endpoint: row.endpoint, status: row.status, key_id: row.keyId, project_id: row.projectId,
    request_counts: { total: row.total, completed: row.completed, failed: row.failed, not_run: row.unrun },
    progress: row.total > 0 ? Math.min(1, ended / row.total) : 0, cost: toDollars(row.costNanos), rerun_count: row.rerun,
    run_by: row.native ? 'provider' : 'gateway',
    created_at: unixSeconds(row.createdAt), ended_at: unixOrNull(batchEndedAt(row)), expires_at: unixSeconds(row.expiresAt),
  };
}

export function manageBatchRoutes(router: Router<GatewayState>, deps: { db: Database; manage: ManagementServices }): void {
  async function visible(ctx: Parameters<typeof authorize>[0], id: string): Promise<BatchRow> {
    const principal = authorize(ctx, SCOPE);
    const [row] = id.length > 64 ? [] : await deps.db.select().from(batches).where(and(eq(batches.orgId, principal.orgId), eq(batches.id, id)));
    if (!row || (principal.projectIds && !principal.projectIds.includes(row.projectId))) throw new GatewayError('resource_not_found', `No batch \`${id}\`.`);
    return row;
  }

  router.get('/batches', async (ctx) => {
    const principal = authorize(ctx, SCOPE);
    const page = readPage(ctx.query, PAGE_DEFAULT);
    const where: Array<SQL | undefined> = [
      eq(batches.orgId, principal.orgId),
      principal.projectIds ? inArray(batches.projectId, principal.projectIds.length ? principal.projectIds : ['']) : undefined,
      afterCursor(NEWEST_FIRST, page.after),
    ];
    const rows = await deps.db.select({ row: batches, at: timestampKey(batches.createdAt) }).from(batches).where(and(...where)).orderBy(...keysetOrder(NEWEST_FIRST)).limit(page.limit + 1);
    ctx.body = pageOf(rows, page.limit, (r) => ({ at: r.at, id: r.row.id }), (r) => presentBatch(r.row));
  });

  router.get('/batches/:id', async (ctx) => {
    const row = await visible(ctx, ctx.params.id!);
    const workflowId = workflowIds.batchRun(row.id);
    ctx.body = { ...presentBatch(row), errors: row.errors, workflow: { id: workflowId, url: deps.manage.workflowUrl(row.orgId, workflowId) } };
  });

  /** The items that have ended, in input order, with what each cost; `after` is a line number. */
  router.get('/batches/:id/items', async (ctx) => {
    const row = await visible(ctx, ctx.params.id!);
    const limit = ctx.query.limit === undefined ? 100 : Number(ctx.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new GatewayError('invalid_request', 'Invalid `limit`: it must be a whole number from 1 to 1000.');
    const after = ctx.query.after === undefined ? 0 : Number(ctx.query.after);
    if (!Number.isInteger(after) || after < 0 || after > 2_147_483_647) throw new GatewayError('invalid_request', 'Invalid `after`: the `next_cursor` of the previous page.');
    const items = await deps.db.select().from(batchItems)
      .where(and(eq(batchItems.batchId, row.id), gt(batchItems.line, after), isNotNull(batchItems.outcome)))
      .orderBy(asc(batchItems.line)).limit(limit + 1);
    const page = items.slice(0, limit);
    ctx.body = {
      object: 'list',
      data: page.map((i) => ({ line: i.line, custom_id: i.customId, outcome: i.outcome!, status_code: i.statusCode, request_id: i.requestId, cost: i.costNanos === null ? null : toDollars(i.costNanos), attempts: i.attempts })),
      has_more: items.length > limit,
      next_cursor: items.length > limit ? String(page.at(-1)!.line) : NO_NEXT_CURSOR,
    };
  });
}

export function manageBatchPaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
  return {
    '/batches': {
      get: {
        tags: ['batches'], operationId: 'listBatches',
        summary: `The organization's batches of both wires, newest first, with progress and cost. Scope \`${SCOPE}\`.`,
        requestParams: { query: z.object({ limit: z.number().int().min(1).max(100).optional(), after: z.string().optional() }) },
        responses: { '200': json(listEnvelope(batchSchema), 'A page of batches.'), ...errors },
      },
    },
    '/batches/{id}': {
      get: {
        tags: ['batches'], operationId: 'getBatch',
        summary: `One batch, with its validation errors and its workflow. Scope \`${SCOPE}\`.`,
        requestParams: { path: z.object({ id: z.string() }) },
        responses: { '200': json(batchDetailSchema, 'The batch.'), ...errors },
      },
    },
    '/batches/{id}/items': {
      get: {
        tags: ['batches'], operationId: 'listBatchItems',
        summary: `A batch's ended items in input order, each with its outcome, status, request id and cost (never its answer). Scope \`${SCOPE}\`.`,
        requestParams: { path: z.object({ id: z.string() }), query: z.object({ limit: z.number().int().min(1).max(1000).optional(), after: z.string().optional() }) },
        responses: {
          '200': json(z.object({ object: z.literal('list'), data: z.array(itemSchema), has_more: z.boolean(), next_cursor: z.string() }), 'A page of items.'),
          ...errors,
        },
      },
    },
  };
}
