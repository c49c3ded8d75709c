import fs from 'node:fs';
import type Router from '@koa/router';
import { and, asc, desc, eq, gt, inArray, lt, type SQL } from 'drizzle-orm';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import { withinReach } from '../../core/auth/key-reach';
import { batchFileExpiry } from '../../core/batches/retention';
import { presentFile, type FileRow } from '../../core/batches/present';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { batches, files } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import type { GatewayState } from '../context';
import { multipartBody } from '../middleware/multipart';
import type { GatewayServices } from './services';

const MB = 1_000_000;
/** OpenAI's bound on a batch input file (its Batch API: 200 MB). The body limit (api/middleware/body.ts) is a little over it. */
export const BATCH_FILE_MAX_BYTES = 200 * MB;

/** The purposes a client uploads; `batch_output` files are the batches' own. */
const UPLOAD_PURPOSES = ['batch'] as const;

/** A key reads the files within its reach, as it reads jobs and its request log (core/auth/key-reach.ts). */
export function fileVisibility(key: KeyContext): SQL {
  return withinReach(key, files);
}

export const unknownFile = (id: string) => new GatewayError('resource_not_found', `No file \`${id}\` within this key's reach.`);

/** OpenAI's list paging: `limit` 1 to 10,000 (default 10,000), `after` an object id, `order` by creation. */
export function openAIListQuery(query: Record<string, unknown>, fallback: number, max: number): { limit: number; after: string | null; order: 'asc' | 'desc' } {
  const limit = query.limit === undefined ? fallback : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > max) throw new GatewayError('invalid_request', `Invalid \`limit\`: it must be a whole number from 1 to ${max}.`);
  const order = query.order === undefined ? 'desc' : query.order;
  if (order !== 'asc' && order !== 'desc') throw new GatewayError('invalid_request', 'Invalid `order`: `asc` or `desc`.');
  const after = typeof query.after === 'string' && query.after.length > 0 ? query.after : null;
  return { limit, after, order };
}

/** OpenAI's list envelope (`first_id`, `last_id`, `has_more`), which its SDK pages through by `after`. */
export function openAIList<T extends { id: string }>(rows: T[], limit: number) {
  const data = rows.slice(0, limit);
  return { object: 'list' as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
}

/** OpenAI's Files API for batch inputs and outputs (issue 56). The upload streams to output storage. */
export function fileRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock; gateway: GatewayServices }): void {
  async function visibleFile(key: KeyContext, id: string): Promise<FileRow> {
    const [row] = await deps.db.select().from(files).where(and(eq(files.id, id), fileVisibility(key)));
    if (!row) throw unknownFile(id);
    return row;
  }

  router.post('/files', multipartBody({ spoolDir: deps.gateway.spoolDir, maxFileBytes: BATCH_FILE_MAX_BYTES, files: ['file'], fields: ['purpose'], maxFiles: 1 }), async (ctx) => {
    const key = ctx.state.key!;
    const { fields, files: parts } = ctx.state.multipart!;
    const purpose = fields.purpose;
    if (typeof purpose !== 'string') throw new GatewayError('invalid_request', 'Missing `purpose`: send `batch`.');
    if (!(UPLOAD_PURPOSES as readonly string[]).includes(purpose)) throw new GatewayError('invalid_request', `Invalid \`purpose\` ${JSON.stringify(purpose)}: this gateway takes \`batch\` files.`);
    const part = parts.find((p) => p.field === 'file');
    if (!part) throw new GatewayError('invalid_request', 'Missing `file`.');
    const now = deps.clock.now();
    const id = newId('file', now.getTime());
    const storageKey = `files/${key.orgId}/${id}`;
    const expiresAt = await batchFileExpiry(deps.db, key.orgId, now);
    // Copied from the spool (removed when the response ends) into storage: never whole in memory.
    const { bytes } = await deps.gateway.storage.put(storageKey, fs.createReadStream(part.path));
    const row: FileRow = {
      id, orgId: key.orgId, keyId: key.keyId, lineageId: key.lineageId, projectId: key.projectId,
      purpose: 'batch', filename: part.filename || 'input.jsonl', bytes, storageKey, expiresAt, createdAt: now,
    };
    try {
      await deps.db.insert(files).values(row);
    } catch (err) {
      await deps.gateway.storage.remove(storageKey).catch(() => undefined);
      throw err;
    }
    ctx.body = presentFile(row);
  });

  router.get('/files', async (ctx) => {
    const key = ctx.state.key!;
    const page = openAIListQuery(ctx.query, 10_000, 10_000);
    const purpose = typeof ctx.query.purpose === 'string' ? ctx.query.purpose : undefined;
    const rows = await deps.db.select().from(files)
      .where(and(
        fileVisibility(key),
        purpose ? eq(files.purpose, purpose as FileRow['purpose']) : undefined,
        page.after ? (page.order === 'desc' ? lt(files.id, page.after) : gt(files.id, page.after)) : undefined,
      ))
      .orderBy(page.order === 'desc' ? desc(files.id) : asc(files.id))
      .limit(page.limit + 1);
    ctx.body = openAIList(rows.map(presentFile), page.limit);
  });

  router.get('/files/:id', async (ctx) => {
    ctx.body = presentFile(await visibleFile(ctx.state.key!, ctx.params.id!));
  });

  router.get('/files/:id/content', async (ctx) => {
    const row = await visibleFile(ctx.state.key!, ctx.params.id!);
    const stored = await deps.gateway.storage.open(row.storageKey);
    if (!stored) throw unknownFile(row.id);
    ctx.set('Content-Type', 'application/jsonl');
    ctx.set('Content-Length', String(stored.bytes));
    ctx.body = stored.stream;
  });

  router.delete('/files/:id', async (ctx) => {
    const row = await visibleFile(ctx.state.key!, ctx.params.id!);
    // A batch still reading its input would fail half-way: the file goes once the batch ends.
    const [running] = await deps.db.select({ id: batches.id }).from(batches)
      .where(and(eq(batches.inputFileId, row.id), inArray(batches.status, ['validating', 'in_progress', 'finalizing', 'cancelling'])));
    if (running) throw new GatewayError('invalid_request', `File \`${row.id}\` is the input of batch \`${running.id}\`, which has not ended; delete it once the batch ends.`);
    await deps.db.delete(files).where(eq(files.id, row.id));
    await deps.gateway.storage.remove(row.storageKey);
    ctx.body = { id: row.id, object: 'file', deleted: true };
  });
}
