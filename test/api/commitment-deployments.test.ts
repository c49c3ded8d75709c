import { and, eq } from 'drizzle-orm';
import { spendLedger } from '../../core/db/schema';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { until } from '../helpers/until';

const DAY_MS = 86_400_000;

/**
 * Issue 54, item 6: a commitment names models; a connection with a model map sends a deployment
 * name upstream (Azure's `prod-mini` for gpt-4o-mini). The ledger records the model billed, the
 * name before the map, so the commitment counts what its deployments spend.
 */
describe('commitments on deployments', () => {
  let f: ChatFixture;
  beforeAll(async () => {
    f = await startChatFixture();
    await f.connect('azure_openai', { extra: { model_map: { 'gpt-4o-mini': 'prod-mini' } } });
  });
  afterAll(() => f.close());

  it('counts a request an Azure deployment served against a commitment on the model it was mapped from', async () => {
    const start = Math.floor((Date.now() - DAY_MS) / 1000);
    const end = Math.floor((Date.now() + 20 * DAY_MS) / 1000);
    const created = await f.client.post<{ id: string; consumed_usd: number }>('/commitments', {
      provider_kind: 'azure_openai', label: 'azure mini', amount_usd: 100, period_start: start, period_end: end, models: ['gpt-4o-mini'],
    });
    expect(created.status).toBe(201);
    const secret = await f.key();
    const answer = await f.chat(secret, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Say hello ${Date.now()}` }] });
    expect(answer.status).toBe(200);
    expect(answer.json.usage.cost).toBeGreaterThan(0);
    await f.settle();
    // The ledger's rows land in batches.
    const row = await until(async () => (await f.database.db.select({ provider: spendLedger.provider, model: spendLedger.model }).from(spendLedger)
      .where(and(eq(spendLedger.orgId, f.tenant.orgId), eq(spendLedger.requestId, answer.json.id))))[0], 'the ledger row');
    expect(row).toEqual({ provider: 'azure_openai', model: 'gpt-4o-mini' });
    const read = await f.client.get<{ consumed_usd: number }>(`/commitments/${created.body.id}`);
    expect(read.body.consumed_usd).toBeCloseTo(answer.json.usage.cost, 9);
  });
});
