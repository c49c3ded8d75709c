import { eq } from 'drizzle-orm';
import { requestLogs, spendLedger } from '../../core/db/schema';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { until } from '../helpers/until';

/**
 * Issue 33 item 10: a graceful stop stops accepting, lets the model calls under way answer,
 * settles and logs them, flushes the writers and only then closes Postgres. Nothing that ran
 * is lost with the process.
 */
describe('graceful stop', () => {
  let f: ChatFixture;
  beforeAll(async () => {
    f = await startChatFixture();
  });
  afterAll(() => f.close());

  it('answers, settles and logs a call in flight when the API stops, then refuses new connections', async () => {
    await f.connect('openai', { directives: 'delay_ms=1500,tag=graceful' });
    const secret = await f.key();
    const answer = f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Slow and steady' }] });
    await until(async () => f.sandbox.received.some((r) => r.path.includes('tag=graceful')), 'the call to reach the provider');
    const stopped = f.api.stop(10_000);
    const res = await answer;
    expect(res.status).toBe(200);
    await stopped;
    await expect(fetch(`${f.api.url}/healthz`)).rejects.toThrow();
    // Written before Postgres closed: read on a connection of the test's own.
    const [row] = await f.database.db.select().from(requestLogs).where(eq(requestLogs.id, res.json.id));
    expect(row).toMatchObject({ status: 200, provider: 'openai' });
    const ledger = await f.database.db.select().from(spendLedger).where(eq(spendLedger.requestId, res.json.id));
    expect(ledger.map((l) => [l.state, l.amount])).toEqual([['settled', row!.cost]]);
  });
});
