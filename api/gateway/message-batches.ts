import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type Router from '@koa/router';
import { and, asc, desc, eq, gt, inArray, lt } from 'drizzle-orm';
import { batchFileExpiry } from '../../core/batches/retention';
import { ElementTooLarge, jsonArrayField, MalformedJsonBody } from '../../core/batches/json-array-field';
import { batchEnded, presentAnthropicBatch } from '../../core/batches/present';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { batches, files } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import type { GatewayContext, GatewayState } from '../context';
import { readsOwnBody } from '../middleware/multipart';
import { requestTooLarge } from '../../core/http/multipart';
import { batchVisibility, cancelBatch, startBatch, visibleBatch } from './batch-runs';
import type { GatewayServices } from './services';

/** Anthropic's bounds on a message batch: 100,000 requests (and 256 MB, the body limit). */
export const MAX_MESSAGE_BATCH_REQUESTS = 100_000;
/** One request of a batch is a Messages request: the Messages endpoint's body limit. */
const MAX_REQUEST_BYTES = 28_000_000;
/** Anthropic's `custom_id`: 1 to 64 of letters, digits, `_` and `-`. */
const CUSTOM_ID = /^[a-zA-Z0-9_-]{1,64}$/;

const refuse = (message: string) => new GatewayError('invalid_request', message);

/** The body as it streams, refused (413) past the endpoint's limit whether or not it declared a length. */
async function* counted(body: AsyncIterable<Buffer>, limit: number): AsyncGenerator<Buffer> {
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    if (bytes > limit) throw requestTooLarge(limit);
    yield chunk;
  }
}

/** One element of `requests`, checked as Anthropic checks it at create; answers the item's input line. */
function inputLine(text: string, index: number, seen: Set<string>): string {
  let request: unknown;
  try {
    request = JSON.parse(text);
  } catch {
    throw refuse(`requests.${index}: not valid JSON.`);
  }
  if (typeof request !== 'object' || request === null || Array.isArray(request)) throw refuse(`requests.${index}: must be an object with \`custom_id\` and \`params\`.`);
  const { custom_id: customId, params } = request as Record<string, unknown>;
  if (typeof customId !== 'string' || !CUSTOM_ID.test(customId)) throw refuse(`requests.${index}.custom_id: 1 to 64 letters, digits, \`_\` or \`-\`.`);
  if (seen.has(customId)) throw refuse(`requests.${index}.custom_id: ${JSON.stringify(customId)} appears more than once; each must be unique in the batch.`);
  seen.add(customId);
  if (typeof params !== 'object' || params === null || Array.isArray(params)) throw refuse(`requests.${index}.params: must be a Messages request object.`);
  const fields = params as Record<string, unknown>;
  if (typeof fields.model !== 'string' || fields.model.length === 0) throw refuse(`requests.${index}.params.model: Field required.`);
  if (typeof fields.max_tokens !== 'number') throw refuse(`requests.${index}.params.max_tokens: Field required.`);
  if (!Array.isArray(fields.messages)) throw refuse(`requests.${index}.params.messages: Field required.`);
  if (fields.stream === true) throw refuse(`requests.${index}.params.stream: a batch request answers whole.`);
  return `${JSON.stringify({ custom_id: customId, method: 'POST', url: '/v1/messages', body: fields })}\n`;
}

/**
 * Anthropic's Message Batches API (issue 56). The body (up to 256 MB) is streamed: each request
 * checked as it comes and written to storage as a line of the batch's input, never held whole;
 * the first bad request refuses the batch (400, named), as Anthropic does at create. The batch
 * then runs as an OpenAI one does (`batchRun`), each item through `/v1/messages`, and its
 * results are one JSONL file of `{custom_id, result}`.
 */
export function messageBatchRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock; gateway: GatewayServices }): void {
  const baseUrlOf = (ctx: GatewayContext) => deps.gateway.jobs.links.baseUrl ?? `${ctx.protocol}://${ctx.host}`;
  const present = (ctx: GatewayContext, row: Parameters<typeof presentAnthropicBatch>[0]) => presentAnthropicBatch(row, baseUrlOf(ctx));
  const run = { db: deps.db, clock: deps.clock, jobs: deps.gateway.jobs };

  router.post('/messages/batches', readsOwnBody(async (ctx) => {
    const key = ctx.state.key!;
    if (!/^application\/json\b/i.test(ctx.get('content-type'))) throw refuse('This endpoint takes a JSON body.');
    const now = deps.clock.now();
    const batchId = newId('msgbatch', now.getTime());
    const fileId = newId('file', now.getTime());
    const storageKey = `files/${key.orgId}/${fileId}`;
    const lines = new PassThrough();
    const stored = deps.gateway.storage.put(storageKey, lines);
    const seen = new Set<string>();
    let count = 0;
    try {
      for await (const element of jsonArrayField(counted(ctx.req, ctx.state.bodyLimit), 'requests', MAX_REQUEST_BYTES)) {
        if (count === MAX_MESSAGE_BATCH_REQUESTS) throw refuse(`A message batch takes at most ${MAX_MESSAGE_BATCH_REQUESTS} requests.`);
        if (!lines.write(inputLine(element, count, seen))) await once(lines, 'drain');
        count += 1;
      }
      if (count === 0) throw refuse('requests: at least one request is required.');
      lines.end();
    } catch (err) {
      lines.destroy();
      await stored.catch(() => undefined);
      await deps.gateway.storage.remove(storageKey);
      if (err instanceof MalformedJsonBody) throw new GatewayError('invalid_json', `The body is not a message batch: ${err.message}.`);
      if (err instanceof ElementTooLarge) throw refuse(`${err.message.replace('requests[', 'requests.').replace(']', '')}.`);
      throw err;
    }
    const { bytes } = await stored;
    await deps.db.insert(files).values({
      id: fileId, orgId: key.orgId, keyId: key.keyId, lineageId: key.lineageId, projectId: key.projectId,
      purpose: 'batch', filename: `${batchId}_requests.jsonl`, bytes, storageKey, expiresAt: await batchFileExpiry(deps.db, key.orgId, now), createdAt: now,
    });
    const created = await startBatch(run, key, { id: batchId, wire: 'anthropic', endpoint: '/v1/messages', inputFileId: fileId, completionWindow: '24h', metadata: null });
    ctx.body = present(ctx, created);
  }));

  router.get('/messages/batches/:id', async (ctx) => {
    ctx.body = present(ctx, await visibleBatch(deps.db, ctx.state.key!, ctx.params.id!, 'anthropic'));
  });

  /** Newest first; `after_id` pages on (older), `before_id` back (newer), `limit` 1 to 1,000 (20). */
  router.get('/messages/batches', async (ctx) => {
    const limit = ctx.query.limit === undefined ? 20 : Number(ctx.query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw refuse('limit: a whole number from 1 to 1000.');
    const afterId = typeof ctx.query.after_id === 'string' ? ctx.query.after_id : null;
    const beforeId = typeof ctx.query.before_id === 'string' ? ctx.query.before_id : null;
    const rows = await deps.db.select().from(batches)
      .where(and(batchVisibility(ctx.state.key!), eq(batches.wire, 'anthropic'), afterId ? lt(batches.id, afterId) : undefined, beforeId ? gt(batches.id, beforeId) : undefined))
      .orderBy(beforeId ? asc(batches.id) : desc(batches.id))
      .limit(limit + 1);
    const page = rows.slice(0, limit);
    if (beforeId) page.reverse();
    ctx.body = { data: page.map((r) => present(ctx, r)), has_more: rows.length > limit, first_id: page[0]?.id ?? null, last_id: page.at(-1)?.id ?? null };
  });

  router.post('/messages/batches/:id/cancel', async (ctx) => {
    const row = await visibleBatch(deps.db, ctx.state.key!, ctx.params.id!, 'anthropic');
    ctx.body = present(ctx, await cancelBatch(run, row, ctx.state.log));
  });

  /** Only an ended batch may be deleted (Anthropic's rule): its row and its files go. */
  router.delete('/messages/batches/:id', async (ctx) => {
    const row = await visibleBatch(deps.db, ctx.state.key!, ctx.params.id!, 'anthropic');
    if (!batchEnded(row)) throw refuse(`Batch \`${row.id}\` has not ended; cancel it first.`);
    const owned = await deps.db.select().from(files).where(inArray(files.id, [row.inputFileId, ...(row.outputFileId ? [row.outputFileId] : [])]));
    await deps.db.transaction(async (tx) => {
      await tx.delete(batches).where(eq(batches.id, row.id));
      if (owned.length > 0) await tx.delete(files).where(inArray(files.id, owned.map((f) => f.id)));
    });
    // The rows are gone, so nothing links to the objects: a removal that fails leaves an object
    // no one can read, and is logged rather than answered as a failed delete.
    for (const file of owned) {
      await deps.gateway.storage.remove(file.storageKey).catch((err: unknown) => ctx.state.log?.warn({ batch_id: row.id, file_id: file.id, err }, 'a deleted batch\'s file could not be removed from storage'));
    }
    ctx.body = { id: row.id, type: 'message_batch_deleted' };
  });

  /** The results as JSONL, one `{custom_id, result}` a request in input order, once the batch has ended. */
  router.get('/messages/batches/:id/results', async (ctx) => {
    const row = await visibleBatch(deps.db, ctx.state.key!, ctx.params.id!, 'anthropic');
    if (!row.outputFileId) throw refuse(`Batch \`${row.id}\` has not ended; its results are not ready.`);
    const [file] = await deps.db.select().from(files).where(eq(files.id, row.outputFileId));
    const stored = file ? await deps.gateway.storage.open(file.storageKey) : null;
    if (!stored) throw new GatewayError('resource_not_found', `Batch \`${row.id}\`'s results are no longer kept.`);
    ctx.set('Content-Type', 'application/binary');
    ctx.set('Content-Length', String(stored.bytes));
    ctx.body = stored.stream;
  });
}
