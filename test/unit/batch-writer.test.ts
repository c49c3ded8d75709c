import { Writable } from 'node:stream';
import { eq, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { createBatchWriter, createFlushLane } from '../../core/db/batch-writer';
import type { Database } from '../../core/db/client';
import { budgetCrossings, organizations } from '../../core/db/schema';
import { createLogger } from '../../core/logger';
import { testDatabase } from '../helpers/harness';

/** The batch writer against the real Postgres: one JSON parameter a batch, defaults filled, drops counted. */
describe('batch writer', () => {
  const database = testDatabase();
  let text = '';
  const logger = createLogger('info', 'test', new Writable({ write: (c, _e, done) => ((text += c.toString()), done()) }));
  const orgId = `org_batch${Date.now().toString(36)}`;
  beforeAll(async () => {
    await database.db.insert(organizations).values({ id: orgId, name: 'batch' });
  });
  afterAll(() => database.close());

  it('writes a batch in one statement, fills defaults the rows leave out, and counts what it had to drop', async () => {
    const writer = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', { flushMs: 10_000, maxBatch: 100, maxQueued: 3 });
    for (let i = 0; i < 5; i++) {
      writer.record({ id: `bcross_${orgId}_${i}`, orgId, scope: `project:p${i}`, window: '2026-11-01', fraction: 0.5, limit: 1.25, spent: (i + 1) / 1e9, behavior: 'alert' });
    }
    expect(writer.dropped()).toBe(2);
    await writer.flush();
    const rows = await database.db.select().from(budgetCrossings).where(eq(budgetCrossings.orgId, orgId));
    expect(rows).toHaveLength(3);
    expect(rows.map((r) => r.spent).sort()).toEqual([0.000000001, 0.000000002, 0.000000003]);
    expect(rows.every((r) => r.crossedAt instanceof Date)).toBe(true);
    expect(text).toContain('"total_dropped":2');
    // Replayed rows (same ids) are taken once.
    writer.record({ id: `bcross_${orgId}_0`, orgId, scope: 'project:p0', window: '2026-11-01', fraction: 0.5, limit: 1.25, spent: 9, behavior: 'alert' });
    await writer.close();
    expect(await database.db.select().from(budgetCrossings).where(eq(budgetCrossings.orgId, orgId))).toHaveLength(3);
  });

  it('writes the rest of a batch Postgres refuses for one row; unstorable text is replaced, a row refused alone is dropped (issue 33)', async () => {
    text = '';
    const writer = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', { flushMs: 10_000, maxBatch: 100 });
    const row = (i: number, scope: string, org = orgId) => ({ id: `bcross_${orgId}_bad${i}`, orgId: org, scope, window: '2026-11-02', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' as const });
    writer.record(row(0, 'project:fine-before'));
    // Text Postgres cannot store: a NUL, and a lone surrogate (JSON.stringify escapes it).
    writer.record(row(1, 'project:nul\u0000here'));
    writer.record(row(2, 'project:lone\ud800'));
    // A row Postgres refuses for what it is (no such organization).
    writer.record(row(3, 'project:orphan', 'org_missing_for_batch'));
    writer.record(row(4, 'project:fine-after'));
    await writer.close();
    const rows = await database.db.select().from(budgetCrossings).where(eq(budgetCrossings.window, '2026-11-02'));
    expect(rows.map((r) => r.scope).sort()).toEqual(['project:fine-after', 'project:fine-before', 'project:lone\ufffd', 'project:nul\ufffdhere']);
    expect(writer.dropped()).toBe(1);
    expect(text).toContain('row refused and dropped');
    expect(text).toContain(`bcross_${orgId}_bad3`);
    expect(text).toContain('unstorable characters replaced');
    // The log names the row, never its content.
    expect(text).not.toContain('project:orphan');
  });

  it('writes a row as it was when recorded once its preparation is done; a row not prepared then is prepared in the flush', async () => {
    const row = (i: number, scope: string) => ({ id: `bcross_${orgId}_prep${i}`, orgId, scope, window: '2026-11-03', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' as const });
    const preparedInFlush: string[] = [];
    const writer = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', {
      flushMs: 10_000,
      // Rows of scope "now:" can be prepared at once; the others wait for the flush.
      prepareNow: (r) => {
        if (!r.scope.startsWith('now:')) return false;
        r.spent = 2;
        return true;
      },
      beforeInsert: async (rows) => {
        for (const r of rows) {
          preparedInFlush.push(r.scope);
          r.spent = 3;
        }
      },
    });
    const now = row(0, 'now:a');
    const later = row(1, 'later:b');
    writer.record(now);
    writer.record(later);
    // What changes after record is not written for a prepared row: its text was written at once.
    now.spent = 99;
    await writer.close();
    const rows = await database.db.select().from(budgetCrossings).where(eq(budgetCrossings.window, '2026-11-03'));
    expect(Object.fromEntries(rows.map((r) => [r.scope, r.spent]))).toEqual({ 'now:a': 2, 'later:b': 3 });
    expect(preparedInFlush).toEqual(['later:b']);
  });

  it('writers sharing a lane insert one batch at a time; a batch takes all that queued while the one before it was written', async () => {
    let active = 0;
    let mostAtOnce = 0;
    const statementRows: number[] = [];
    const dialect = new PgDialect();
    // The real database, watched: how many inserts are under way at once, and how many rows each takes.
    const watched = {
      execute: async (query: SQL) => {
        active++;
        mostAtOnce = Math.max(mostAtOnce, active);
        statementRows.push((JSON.parse(dialect.sqlToQuery(query).params[0] as string) as unknown[]).length);
        try {
          await new Promise((r) => setTimeout(r, 5));
          return await database.db.execute(query);
        } finally {
          active--;
        }
      },
    } as unknown as Database;
    const lane = createFlushLane();
    const writers = [0, 1, 2].map(() => createBatchWriter(watched, budgetCrossings, logger, 'crossings', { flushMs: 10_000, maxBatch: 4, maxStatementRows: 5, lane }));
    writers.forEach((writer, w) => {
      for (let i = 0; i < 12; i++) writer.record({ id: `bcross_${orgId}_lane${w}_${i}`, orgId, scope: `project:lane${w}_${i}`, window: '2026-11-04', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' });
    });
    await Promise.all(writers.map((writer) => writer.close()));
    expect(await database.db.select().from(budgetCrossings).where(eq(budgetCrossings.window, '2026-11-04'))).toHaveLength(36);
    expect(mostAtOnce).toBe(1);
    // Each writer: its 4th row starts a batch of 4; the 8 recorded meanwhile are the next
    // batch, not two more of 4, in statements of at most 5 rows.
    expect(statementRows.sort()).toEqual([3, 3, 3, 4, 4, 4, 5, 5, 5]);
  });

  it('after a batch, leaves fewer than maxBatch rows for the timer instead of a statement of their own', async () => {
    const statements: number[] = [];
    const dialect = new PgDialect();
    const watched = {
      execute: async (query: SQL) => {
        statements.push((JSON.parse(dialect.sqlToQuery(query).params[0] as string) as unknown[]).length);
        await new Promise((r) => setTimeout(r, 5));
        return database.db.execute(query);
      },
    } as unknown as Database;
    const writer = createBatchWriter(watched, budgetCrossings, logger, 'crossings', { flushMs: 10_000, maxBatch: 4 });
    const row = (i: number) => ({ id: `bcross_${orgId}_part${i}`, orgId, scope: `project:part${i}`, window: '2026-11-06', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' as const });
    for (let i = 0; i < 4; i++) writer.record(row(i));
    // Two more while the first batch is written: not enough for a batch of their own.
    writer.record(row(4));
    writer.record(row(5));
    await new Promise((r) => setTimeout(r, 50));
    expect(statements).toEqual([4]);
    expect(writer.queued()).toBe(2);
    await writer.close();
    expect(statements).toEqual([4, 2]);
  });

  // Issue 54's soak: a Postgres restart dropped every batch of its seconds, settles and log rows alike.
  it('keeps a batch Postgres could not take (connection refused) and writes it once Postgres is back, nothing dropped', async () => {
    text = '';
    let refusals = 2;
    const statements: number[] = [];
    const flaky = {
      execute(query: SQL) {
        if (refusals > 0) {
          refusals -= 1;
          return Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { errno: -111, syscall: 'connect' }));
        }
        statements.push(1);
        return database.db.execute(query);
      },
    } as unknown as Database;
    const writer = createBatchWriter(flaky, budgetCrossings, logger, 'crossings', { flushMs: 10, maxBatch: 100, retryMs: 20 });
    const row = (i: number) => ({ id: `bcross_${orgId}_retry${i}`, orgId, scope: `project:retry${i}`, window: '2026-11-07', fraction: 0.5, limit: 1, spent: i, behavior: 'alert' as const });
    for (let i = 0; i < 3; i++) writer.record(row(i));
    await new Promise((r) => setTimeout(r, 30));
    // Recorded while Postgres is away: they wait behind the first rows.
    writer.record(row(3));
    const written = async () => (await database.db.select().from(budgetCrossings).where(eq(budgetCrossings.window, '2026-11-07'))).filter((r) => r.orgId === orgId);
    for (let i = 0; i < 100 && (await written()).length < 4; i++) await new Promise((r) => setTimeout(r, 20));
    expect((await written()).map((r) => r.spent).sort()).toEqual([0, 1, 2, 3]);
    expect(writer.dropped()).toBe(0);
    expect(refusals).toBe(0);
    expect(text).toContain('the rows wait and are tried again');
    await writer.close();
  });

  it('gives up a batch Postgres never takes only at close, after trying for a while, and counts it', async () => {
    text = '';
    const down = { execute: () => Promise.reject(new Error('Connection terminated unexpectedly')) } as unknown as Database;
    const writer = createBatchWriter(down, budgetCrossings, logger, 'crossings', { flushMs: 10, retryMs: 10, closeRetryMs: 100 });
    writer.record({ id: `bcross_${orgId}_never`, orgId, scope: 'project:never', window: '2026-11-08', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' });
    await new Promise((r) => setTimeout(r, 50));
    expect([writer.dropped(), writer.queued()]).toEqual([0, 1]);
    await writer.close();
    expect([writer.dropped(), writer.queued()]).toEqual([1, 0]);
    expect(text).toContain('given up at close');
  });

  it('drops a row JSON cannot hold when it is recorded, and says so, without throwing into the request', () => {
    text = '';
    const writer = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', { flushMs: 10_000 });
    const bad = { id: `bcross_${orgId}_bigint`, orgId, scope: 'project:big', window: '2026-11-05', fraction: 0.5, limit: 1, spent: 10n as unknown as number, behavior: 'alert' as const };
    expect(() => writer.record(bad)).not.toThrow();
    expect(writer.dropped()).toBe(1);
    expect(writer.queued()).toBe(0);
    expect(text).toContain('could not be written out');
  });

  it('a lane runs the next turn after one that failed', async () => {
    const lane = createFlushLane();
    const ran: string[] = [];
    const failed = lane.run(async () => {
      ran.push('first');
      throw new Error('boom');
    });
    const second = lane.run(async () => void ran.push('second'));
    await expect(failed).rejects.toThrow('boom');
    await second;
    expect(ran).toEqual(['first', 'second']);
  });
});
