import { Writable } from 'node:stream';
import { eq, sql } from 'drizzle-orm';
import { createBatchWriter } from '../../core/db/batch-writer';
import { budgetCrossings, organizations, requestLogs, usageHourly } from '../../core/db/schema';
import { createLogger } from '../../core/logger';
import { createRequestLogWriter, type RequestLogEntry } from '../../core/request-log/writer';
import { testDatabase } from '../helpers/harness';

/**
 * The batch writer's after-insert hook and the usage rollup it keeps, against the real Postgres:
 * one statement a batch, so replays are not counted twice and a refused batch counts nowhere.
 */
describe('usage rollup on the request-log batch', () => {
  const database = testDatabase();
  const logger = createLogger('info', 'test', new Writable({ write: (_c, _e, done) => done() }));
  const orgId = `org_rollup${Date.now().toString(36)}`;
  beforeAll(async () => {
    await database.db.insert(organizations).values({ id: orgId, name: 'rollup' });
  });
  afterAll(() => database.close());

  it('the hook sees only the rows the insert took, and a failing hook takes the batch with it', async () => {
    const counting = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', {
      flushMs: 10_000,
      // The count of rows the insert returned, written where the test can read it.
      afterInsert: (inserted) => sql`update organizations set name = 'took ' || (select count(*) from ${inserted}) where id = ${orgId}`,
    });
    const crossing = (i: number) => ({ id: `bc_${orgId}_${i}`, orgId, scope: `project:p${i}`, window: '2026-11-01', fraction: 0.5, limit: 1, spent: 1, behavior: 'alert' as const });
    counting.record(crossing(0));
    counting.record(crossing(1));
    await counting.flush();
    const name = async () => (await database.db.select({ name: organizations.name }).from(organizations).where(eq(organizations.id, orgId)))[0]!.name;
    expect(await name()).toBe('took 2');
    counting.record(crossing(1));
    counting.record(crossing(2));
    await counting.flush();
    expect(await name()).toBe('took 1');

    const failing = createBatchWriter(database.db, budgetCrossings, logger, 'crossings', { flushMs: 10_000, afterInsert: (inserted) => sql`select 1 / (count(*) - count(*)) from ${inserted}` });
    failing.record(crossing(3));
    await failing.close();
    expect(failing.dropped()).toBe(1);
    expect(await database.db.select().from(budgetCrossings).where(eq(budgetCrossings.id, crossing(3).id))).toHaveLength(0);
  });

  it('request-log batches add to usage_hourly: grouped by hour and attribution, replays once, refused batches nowhere', async () => {
    const writer = createRequestLogWriter(database.db, logger, { flushMs: 10_000 });
    const at = new Date('2026-03-01T10:15:00Z');
    const row = (id: string, over: Partial<RequestLogEntry> = {}): RequestLogEntry => ({
      id: `req_${orgId}_${id}`, orgId, keyId: 'key_a', projectId: 'proj_a', endpoint: 'chat.completions', requestedModel: 'openai/gpt-4o-mini', provider: 'openai',
      status: 200, latencyMs: 5, usage: { prompt_tokens: 2, completion_tokens: 6, total_tokens: 8 }, cost: 0.25, createdAt: at, ...over,
    });
    writer.record(row('1'));
    writer.record(row('2', { createdAt: new Date('2026-03-01T10:59:59Z'), cost: null }));
    writer.record(row('3', { status: 502, usage: null, cost: null }));
    writer.record(row('4', { createdAt: new Date('2026-03-01T11:00:00Z'), userId: 'u1', tags: { team: 'a' }, usage: { prompt_tokens: 'x', completion_tokens: 1.6 } }));
    await writer.flush();
    // A replay of row 1 and a new row in the same batch: only the new one counts.
    writer.record(row('1'));
    writer.record(row('5', { cost: 0.5 }));
    await writer.flush();
    // A batch Postgres refuses for one row (an unknown organization) is written row by row
    // (issue 33): the refused row is dropped and counted nowhere; the other row counts once.
    writer.record(row('6', { orgId: 'org_missing', cost: 100 }));
    writer.record(row('7', { cost: 100 }));
    await writer.close();
    expect(writer.dropped()).toBe(1);

    const rollup = await database.db.select().from(usageHourly).where(eq(usageHourly.orgId, orgId)).orderBy(usageHourly.hour);
    expect(rollup.map(({ orgId: _o, ...r }) => r)).toEqual([
      {
        hour: new Date('2026-03-01T10:00:00Z'), keyId: 'key_a', projectId: 'proj_a', model: 'openai/gpt-4o-mini', provider: 'openai', userId: '', tags: {},
        requests: 5, promptTokens: 8, completionTokens: 24, totalTokens: 32, cost: 100.75, unpricedRequests: 1,
      },
      {
        hour: new Date('2026-03-01T11:00:00Z'), keyId: 'key_a', projectId: 'proj_a', model: 'openai/gpt-4o-mini', provider: 'openai', userId: 'u1', tags: { team: 'a' },
        requests: 1, promptTokens: 0, completionTokens: 2, totalTokens: 2, cost: 0.25, unpricedRequests: 0,
      },
    ]);
    expect(await database.db.select().from(requestLogs).where(eq(requestLogs.orgId, orgId))).toHaveLength(6);
  });
});
