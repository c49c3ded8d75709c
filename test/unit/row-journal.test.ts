import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { eq } from 'drizzle-orm';
import { createBatchWriter } from '../../core/db/batch-writer';
import { createPendingRowJournal, createRowJournal, SEGMENT_MS } from '../../core/db/row-journal';
import { budgetCrossings, organizations } from '../../core/db/schema';
import { createLogger } from '../../core/logger';
import { testDatabase } from '../helpers/harness';

/**
 * Issue 54's soak: a SIGKILLed API process lost the settles and request-log rows still queued in
 * its memory. With a row journal each queued row is on local disk until Postgres has it, and the
 * next process inserts what a dead one left. A real process, really killed.
 */
describe('row journal (core/db/row-journal.ts)', () => {
  const database = testDatabase();
  const orgId = `org_journal${Date.now().toString(36)}`;
  const logger = createLogger('error', 'test');
  let dir: string;
  beforeAll(async () => {
    await database.db.insert(organizations).values({ id: orgId, name: 'journal' });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-journal-'));
  });
  afterAll(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    await database.close();
  });
  const rowsOf = () => database.db.select().from(budgetCrossings).where(eq(budgetCrossings.orgId, orgId));

  it('inserts the rows a SIGKILLed process had queued, once, and removes its segments', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.resolve(__dirname, '../helpers/journal-writer.ts')], {
      env: { ...process.env, JOURNAL_DIR: dir, JOURNAL_ORG: orgId, JOURNAL_ROWS: '25' }, stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const said = JSON.parse(await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`journal writer exited with ${code}`)));
    })) as { queued: number };
    expect(said.queued).toBe(25);
    child.kill('SIGKILL');
    await exited;
    expect(await rowsOf()).toHaveLength(0);

    // The next process here: its writer finds the dead one's segment and inserts it.
    const writer = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', { journal: createRowJournal(dir, 'budget_crossings') });
    expect(await writer.recover()).toBe(1);
    expect((await rowsOf()).map((r) => r.spent).sort((a, b) => a - b)).toEqual(Array.from({ length: 25 }, (_, i) => i));
    // Nothing is left of it to insert again; its own journal goes when it closes with everything written.
    expect(await writer.recover()).toBe(0);
    await writer.close();
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.jsonl'))).toEqual([]);
  }, 30_000);

  it('inserts a killed process\'s pending rows never closed at their amount; a closed one not at all; a settled one at its own row', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.resolve(__dirname, '../helpers/journal-writer.ts')], {
      env: { ...process.env, JOURNAL_DIR: dir, JOURNAL_ORG: orgId, JOURNAL_ROWS: '0', JOURNAL_PENDING: '1' }, stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`journal writer exited with ${code}`)));
    });
    child.kill('SIGKILL');
    await exited;
    const writer = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', {
      journal: createRowJournal(dir, 'budget_crossings'), pendingJournal: createPendingRowJournal(dir, 'budget_crossings_pending'),
    });
    await writer.recover();
    const rows = (await rowsOf()).filter((r) => r.window === '2026-11-11');
    expect(rows.map((r) => [r.scope, r.spent]).sort()).toEqual([['project:p1', 1], ['project:p2', 102]]);
    await writer.close();
  }, 30_000);

  it('removes a segment once a batch with all its rows is in Postgres and a newer segment has started, and keeps rows Postgres did not take for the next process', async () => {
    const journal = createRowJournal(dir, 'budget_crossings');
    const writer = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', { flushMs: 10, journal });
    const segments = () => fs.readdirSync(dir).filter((f) => f.endsWith('.jsonl')).map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('');
    writer.record({ id: `bcross_${orgId}_seg`, orgId, scope: 'project:seg', window: '2026-11-10', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' });
    await writer.flush();
    // Written, and its segment is still the one being written: it stays until a newer one starts (SEGMENT_MS).
    expect(segments()).toContain('"project:seg"');
    await new Promise((r) => setTimeout(r, SEGMENT_MS + 50));
    writer.record({ id: `bcross_${orgId}_seg2`, orgId, scope: 'project:seg2', window: '2026-11-10', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' });
    await writer.flush();
    await new Promise((r) => setTimeout(r, 20));
    // That batch started a new segment: the old one, both rows in Postgres, is gone.
    expect(segments()).not.toContain('"project:seg');
    await writer.close();

    const down = { execute: () => Promise.reject(new Error('Connection terminated unexpectedly')) } as never;
    const failing = createBatchWriter(down, budgetCrossings, logger, 'crossings', { flushMs: 10, retryMs: 10, closeRetryMs: 50, journal: createRowJournal(dir, 'budget_crossings') });
    failing.record({ id: `bcross_${orgId}_kept`, orgId, scope: 'project:kept', window: '2026-11-10', fraction: 0.5, limit: 1, spent: 2, behavior: 'alert' });
    await failing.close();
    expect(segments()).toContain('"project:kept"');
  });
});
