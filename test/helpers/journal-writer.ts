/**
 * A batch writer with a row journal, alone, as a process a test can SIGKILL (issue 54): it
 * queues JOURNAL_ROWS budget-crossing rows that its long flush interval keeps in memory, says
 * so on stdout once they are written out to the journal, and waits to be killed.
 */
import { createBatchWriter } from '../../core/db/batch-writer';
import { createPendingRowJournal, createRowJournal } from '../../core/db/row-journal';
import { connectDatabase } from '../../core/db/client';
import { budgetCrossings } from '../../core/db/schema';
import { createLogger } from '../../core/logger';

const database = connectDatabase(process.env.DATABASE_URL!, { max: 1 });
const writer = createBatchWriter(database.db, budgetCrossings, createLogger('error', 'journal-writer'), 'crossings', {
  flushMs: 600_000, maxBatch: 10_000, journal: createRowJournal(process.env.JOURNAL_DIR!, 'budget_crossings'),
  ...(process.env.JOURNAL_PENDING === '1' && { pendingJournal: createPendingRowJournal(process.env.JOURNAL_DIR!, 'budget_crossings_pending') }),
});
const org = process.env.JOURNAL_ORG!;
for (let i = 0; i < Number(process.env.JOURNAL_ROWS); i++) {
  writer.record({ id: `bcross_${org}_j${i}`, orgId: org, scope: `project:j${i}`, window: '2026-11-09', fraction: 0.5, limit: 1, spent: i, behavior: 'alert' });
}
// Pending rows (calls in flight): one ends owing nothing, one settles under its own id, one is in flight at the kill.
if (process.env.JOURNAL_PENDING === '1') {
  const row = (i: number, spent: number) => ({ id: `bcross_${org}_p${i}`, orgId: org, scope: `project:p${i}`, window: '2026-11-11', fraction: 0.5, limit: 1, spent, behavior: 'alert' as const });
  const closers = [0, 1, 2].map((i) => writer.pending(row(i, 100 + i)));
  closers[0]!();
  writer.record(row(1, 1));
  closers[1]!();
}
// The journal writes once the turn of the event loop ends.
setImmediate(() => {
  console.log(JSON.stringify({ queued: writer.queued() }));
  setInterval(() => undefined, 1000);
});
