import http from 'node:http';
import { inArray } from 'drizzle-orm';
import { spendLedger } from '../../core/db/schema';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { until } from '../helpers/until';

/**
 * The ledger against the provider's bill, request by request (issue 54): each kind of call goes
 * through the gateway to the sandbox, which bills it at list price under the gateway's request
 * id (sent upstream as X-Client-Request-Id). The ledger must count at least what the provider
 * bills for every request: whole and streamed answers, a stream whose client left while the
 * model reasoned, native Messages with thinking and cache writes, Responses, a failover, a call
 * our timeout cut, embeddings and images.
 */
describe('money oracle: the ledger counts at least the provider\'s bill, per request', () => {
  let f: ChatFixture;
  let key: string;
  const SECRET = 'sk-sandbox-oracle';

  beforeAll(async () => {
    f = await startChatFixture();
    // A one-second timeout: a call the sandbox holds for 1.5 s is cut by the gateway.
    await f.connect('openai', { secret: SECRET, extra: { timeout_ms: 1000 } });
    await f.connect('anthropic', { secret: SECRET });
    key = await f.key({ credit_limit: { amount: 100, period: 'monthly' } });
  });
  afterAll(() => f.close());

  const billOf = async (requestId: string): Promise<Loose> => {
    const res = await fetch(`${f.sandbox.url}/_sandbox/bill?request_id=${requestId}`, { headers: { authorization: `Bearer ${SECRET}` } });
    return res.json() as Promise<Loose>;
  };
  const ledgerOf = async (requestIds: string[]) => f.database.db.select().from(spendLedger).where(inArray(spendLedger.requestId, requestIds));

  /** Waits for the request's ledger rows and checks them against its bill; answers both. */
  async function reconciled(requestId: string): Promise<{ billed: number; charged: number }> {
    const bill = await until(async () => {
      const b = await billOf(requestId);
      return b.lines.length > 0 ? b : null;
    }, `the bill of ${requestId}`);
    expect(bill.unpriced).toBe(0);
    const rows = await until(async () => {
      const r = await ledgerOf([requestId]);
      return r.length > 0 && r.reduce((sum, row) => sum + Number(row.amount), 0) >= bill.total_usd - 1e-12 ? r : null;
    }, `ledger rows of ${requestId} covering its bill of $${bill.total_usd}`, 20_000).catch(async () => ledgerOf([requestId]));
    const charged = rows.reduce((sum, row) => sum + Number(row.amount), 0);
    expect({ requestId, charged: charged >= bill.total_usd - 1e-12 }).toEqual({ requestId, charged: true });
    return { billed: bill.total_usd, charged };
  }

  it('sends the gateway request id upstream, and the bill is kept under it', async () => {
    const res = await f.chat(key, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] });
    expect(res.status).toBe(200);
    expect(f.sandbox.received.at(-1)!.headers['x-client-request-id']).toBe(res.id);
    const { billed, charged } = await reconciled(res.id);
    expect(billed).toBeCloseTo((2 * 0.15 + 6 * 0.6) / 1e6, 12);
    expect(charged).toBeCloseTo(billed, 12);
  });

  it('a streamed answer read to its end', async () => {
    const res = await f.chat(key, { model: 'openai/gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'Tell me [sandbox words=40]' }] });
    await reconciled(res.id);
  });

  it('a stream whose client left while the model reasoned: the provider bills all of it', async () => {
    // The client reads the head of the answer and hangs up; the provider finishes its 2,000 reasoning tokens.
    const id = await new Promise<string>((resolve, reject) => {
      const req = http.request(`${f.api.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` } }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve(String(res.headers['x-gw-request-id']));
        });
      });
      req.on('error', () => undefined);
      req.once('error', reject);
      req.end(JSON.stringify({ model: 'openai/o3-mini', stream: true, messages: [{ role: 'user', content: 'Think hard [sandbox words=300 reasoning=2000]' }] }));
    });
    const { billed } = await reconciled(id);
    expect(billed).toBeGreaterThan((300 * 4.4) / 1e6);
  });

  it('native Messages with thinking and cache writes, whole and streamed', async () => {
    const body = {
      model: 'anthropic/claude-3-5-haiku-latest', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [{ role: 'user', content: 'Say hello to the whole room please [sandbox cache_write=3 cache_write_1h=2 reasoning=500]' }],
    };
    const whole = await f.post('/v1/messages', body, { authorization: `Bearer ${key}`, 'anthropic-version': '2023-06-01' });
    expect(whole.status).toBe(200);
    await reconciled(whole.id);
    const streamed = await f.post('/v1/messages', { ...body, stream: true }, { authorization: `Bearer ${key}`, 'anthropic-version': '2023-06-01' });
    expect(streamed.status).toBe(200);
    await reconciled(streamed.id);
  });

  it('Responses, with reasoning', async () => {
    const res = await f.post('/v1/responses', { model: 'openai/o3-mini', input: 'Think [sandbox reasoning=300 words=20]', reasoning: { effort: 'high' } }, { authorization: `Bearer ${key}` });
    expect(res.status).toBe(200);
    await reconciled(res.id);
  });

  it('calls our timeout cut while the provider worked on them: each attempt is billed', async () => {
    const res = await f.chat(key, { model: 'openai/gpt-4o-mini', max_tokens: 200, messages: [{ role: 'user', content: 'slow [sandbox delay_ms=1500]' }] });
    expect(res.status).toBe(408);
    await until(async () => (await billOf(res.id)).lines.length === 2, 'both attempts billed');
    await reconciled(res.id);
  });

  it('embeddings and images', async () => {
    const embedded = await f.post('/v1/embeddings', { model: 'openai/text-embedding-3-small', input: ['one two three', 'four'] }, { authorization: `Bearer ${key}` });
    expect(embedded.status).toBe(200);
    await reconciled(embedded.id);
    const image = await f.post('/v1/images/generations', { model: 'openai/dall-e-3', prompt: 'a fox' }, { authorization: `Bearer ${key}` });
    expect(image.status).toBe(200);
    const { billed } = await reconciled(image.id);
    expect(billed).toBe(0.04);
  });
});
