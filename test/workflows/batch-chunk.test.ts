import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { MockActivityEnvironment } from '@temporalio/testing';
import { eq } from 'drizzle-orm';
import { createBatchActivities, type BatchItemAnswer } from '../../activities/batch-run';
import { systemClock } from '../../core/clock';
import { batches, batchItems, files, organizations } from '../../core/db/schema';
import { localOutputStorage } from '../../core/storage/output-storage';
import { testDatabase } from '../helpers/harness';

const ok = (id: string): BatchItemAnswer => ({ status: 200, body: { id, usage: { cost: 0.001 } }, requestId: id, retryAfterMs: null });
const refusal = (status: number, code: string | null): BatchItemAnswer => ({ status, body: { error: { message: 'no', type: 't', code } }, requestId: null, retryAfterMs: 300 });

/**
 * `runBatchChunk` against real Postgres and storage with a fake item caller (issue 56): how it
 * paces to the key's rate limit, tells a provider's 429 from the key's, retries a 402 alone
 * before it believes the limit has no room, and stops for a cancel or the window's end.
 */
describe('a batch chunk', () => {
  const database = testDatabase();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-batch-chunk-'));
  const storage = localOutputStorage(dir);
  const run = Date.now().toString(36);
  const orgId = `org_chunk_${run}`;
  let seq = 0;

  beforeAll(async () => {
    await database.db.insert(organizations).values({ id: orgId, name: 'chunks' });
  });
  afterAll(async () => {
    await database.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A validated batch of `items` lines, its chunk 0 ready to run, the caller answering `answer`. */
  async function batchWith(items: number, answer: (call: number) => BatchItemAnswer, changes: Partial<typeof batches.$inferInsert> = {}, options: { lines?: string[]; validate?: boolean } = {}) {
    const id = `batch_chunk_${run}_${seq++}`;
    const storageKey = `files/${orgId}/${id}`;
    const lines = options.lines ?? Array.from({ length: items }, (_, i) => JSON.stringify({ custom_id: `c${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [] } }));
    await storage.put(storageKey, Readable.from([Buffer.from(lines.join('\n'))]));
    await database.db.insert(files).values({ id: `file_${id}`, orgId, keyId: 'key_x', lineageId: 'key_x', projectId: 'proj_x', purpose: 'batch', filename: 'in.jsonl', bytes: 1, storageKey });
    await database.db.insert(batches).values({
      id, orgId, keyId: 'key_x', lineageId: 'key_x', projectId: 'proj_x', wire: 'openai', endpoint: '/v1/chat/completions', inputFileId: `file_${id}`,
      completionWindow: '24h', chunkItems: 100, expiresAt: new Date(Date.now() + 3_600_000), ...changes,
    });
    const calls: string[] = [];
    const activities = createBatchActivities({
      db: database.db, storage, clock: systemClock, publicUrl: 'http://localhost', startDeliveries: async () => undefined,
      callItem: async ({ body }) => {
        calls.push(JSON.stringify(body));
        return answer(calls.length);
      },
    });
    if (options.validate !== false) expect(await new MockActivityEnvironment().run(activities.validateBatchInput, { batchId: id })).toEqual({ status: 'in_progress', chunks: 1, native: false });
    return { id, calls, storageKey, activities, runChunk: (concurrency = 4, env = new MockActivityEnvironment()) => env.run(activities.runBatchChunk, { batchId: id, chunk: 0, concurrency }) };
  }
  const itemsOf = async (id: string) => database.db.select().from(batchItems).where(eq(batchItems.batchId, id)).orderBy(batchItems.line);
  const rowOf = async (id: string) => (await database.db.select().from(batches).where(eq(batches.id, id)))[0]!;

  it('waits out the key\'s own 429 and calls the item again; a provider\'s 429 is the item\'s answer', async () => {
    // Call 1 (item 1) meets the key's limit, call 2 is item 1 again, call 3 (item 2) a provider's 429.
    const b = await batchWith(3, (call) => (call === 1 ? refusal(429, null) : call === 3 ? refusal(429, 'provider_rate_limited') : ok(`r${call}`)));
    expect(await b.runChunk(1)).toEqual({ stopped: null });
    const items = await itemsOf(b.id);
    expect(items.map((i) => [i.line, i.outcome, i.statusCode])).toEqual([[1, 'succeeded', 200], [2, 'errored', 429], [3, 'succeeded', 200]]);
    expect(b.calls).toHaveLength(4);
    expect(await rowOf(b.id)).toMatchObject({ completed: 2, failed: 1, costNanos: 2_000_000 });
  });

  it('calls a 402 alone once more before it believes the limit: room then, the batch goes on', async () => {
    const b = await batchWith(4, (call) => (call === 2 ? refusal(402, 'key_budget') : ok(`r${call}`)));
    expect(await b.runChunk(4)).toEqual({ stopped: null });
    expect((await itemsOf(b.id)).every((i) => i.outcome === 'succeeded')).toBe(true);
    expect(b.calls).toHaveLength(5);
  });

  it('stops at a 402 that holds alone too, with the refusal every item not run will carry', async () => {
    const b = await batchWith(10, (call) => (call >= 3 ? refusal(402, 'key_budget') : ok(`r${call}`)));
    const result = await b.runChunk(2);
    expect(result).toEqual({ stopped: 'budget', refusal: { statusCode: 402, body: { error: { message: 'no', type: 't', code: 'key_budget' } } } });
    const items = await itemsOf(b.id);
    expect(items.map((i) => i.outcome)).toEqual(['succeeded', 'succeeded', 'errored', 'errored']);
  });

  it('runs nothing once the batch is being cancelled or past its window', async () => {
    const cancelled = await batchWith(3, (call) => ok(`r${call}`));
    await database.db.update(batches).set({ status: 'cancelling' }).where(eq(batches.id, cancelled.id));
    expect(await cancelled.runChunk()).toEqual({ stopped: 'cancelled' });
    const expired = await batchWith(3, (call) => ok(`r${call}`));
    await database.db.update(batches).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(batches.id, expired.id));
    expect(await expired.runChunk()).toEqual({ stopped: 'expired' });
    expect([...cancelled.calls, ...expired.calls]).toEqual([]);
  });

  it('runs only what was not recorded when a chunk is run again, and counts a second mark as a re-run', async () => {
    const b = await batchWith(3, (call) => ok(`r${call}`));
    // A first attempt recorded item 1 and had item 2 in flight when its worker died.
    await database.db.insert(batchItems).values([
      { batchId: b.id, line: 1, customId: 'c0', outcome: 'succeeded', attempts: 1, statusCode: 200 },
      { batchId: b.id, line: 2, customId: 'c1', attempts: 1 },
    ]);
    expect(await b.runChunk()).toEqual({ stopped: null });
    expect(b.calls).toHaveLength(2);
    expect((await itemsOf(b.id)).map((i) => i.attempts)).toEqual([1, 2, 1]);
    expect((await rowOf(b.id)).rerun).toBe(1);
  });

  it('goes on past a 402 of one item\'s own limit (its end user\'s cap): only a shared limit stops the batch', async () => {
    const b = await batchWith(4, (call) => (call === 2 || call === 5 ? refusal(402, 'end_user_budget') : ok(`r${call}`)));
    expect(await b.runChunk(4)).toEqual({ stopped: null });
    expect((await itemsOf(b.id)).map((i) => i.outcome)).toEqual(['succeeded', 'errored', 'succeeded', 'succeeded']);
  });

  it('fails a refused input even when a cancel came while it was being read', async () => {
    const b = await batchWith(0, (call) => ok(`r${call}`), {}, { lines: ['not json'], validate: false });
    await database.db.update(batches).set({ status: 'cancelling' }).where(eq(batches.id, b.id));
    expect(await new MockActivityEnvironment().run(b.activities.validateBatchInput, { batchId: b.id })).toEqual({ status: 'failed' });
    expect(await rowOf(b.id)).toMatchObject({ status: 'failed', errors: [expect.objectContaining({ code: 'invalid_json_line', line: 1 })] });
  });

  it('stops calling models once its attempt is cancelled (timed out, replaced by a retry)', async () => {
    const b = await batchWith(8, (call) => ok(`r${call}`));
    const env = new MockActivityEnvironment();
    env.cancel();
    await expect(b.runChunk(2, env)).rejects.toBeTruthy();
    expect(b.calls).toEqual([]);
  });

  it('ends a chunk whose input is gone with a failure no retry repeats', async () => {
    const b = await batchWith(3, (call) => ok(`r${call}`));
    await storage.remove(b.storageKey);
    await expect(b.runChunk()).rejects.toMatchObject({ type: 'BatchInputGone', nonRetryable: true });
  });

  it('names an item its worker lost, called and never recorded, in the error file of a batch that then ended', async () => {
    const b = await batchWith(3, (call) => ok(`r${call}`));
    await database.db.insert(batchItems).values([
      { batchId: b.id, line: 1, customId: 'c0', outcome: 'succeeded', attempts: 1, statusCode: 200, body: { id: 'r' } },
      { batchId: b.id, line: 2, customId: 'c1', attempts: 1 },
    ]);
    await database.db.update(batches).set({ status: 'cancelling', completed: 1 }).where(eq(batches.id, b.id));
    await new MockActivityEnvironment().run(b.activities.finalizeBatch, { batchId: b.id, ending: { status: 'cancelled' as const } });
    const row = await rowOf(b.id);
    expect(row).toMatchObject({ status: 'cancelled', completed: 1, failed: 1, unrun: 1 });
    const stored = await storage.open(`files/${orgId}/${(await database.db.select({ id: batches.errorFileId }).from(batches).where(eq(batches.id, b.id)))[0]!.id!}`);
    const chunks: Buffer[] = [];
    for await (const chunk of stored!.stream) chunks.push(chunk as Buffer);
    const lines = Buffer.concat(chunks).toString().trim().split('\n').map((l) => JSON.parse(l) as { custom_id: string; error: { code: string } });
    expect(lines.map((l) => [l.custom_id, l.error.code])).toEqual([['c1', 'batch_item_lost'], ['c2', 'batch_cancelled']]);
  });
});
