import { Writable } from 'node:stream';
import { eq } from 'drizzle-orm';
import { createBatchWriter } from '../../core/db/batch-writer';
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
});
