import Anthropic from '@anthropic-ai/sdk';
import { eq } from 'drizzle-orm';
import { batches, requestLogs } from '../../core/db/schema';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { saveHistory } from '../helpers/histories';
import { until } from '../helpers/until';

/**
 * The route the requests name: Anthropic has a batch API, so a batch naming its model directly
 * would go to it (batches-native.test.ts); this route keeps its batches on the gateway's path.
 */
const HAIKU = 'gwrun-haiku';

const request = (customId: string, content: string, model = HAIKU) => ({
  custom_id: customId,
  params: { model, max_tokens: 64, messages: [{ role: 'user' as const, content }] },
});

/**
 * Anthropic's Message Batches through the gateway (issue 56), with the unmodified
 * `@anthropic-ai/sdk`: `messages.batches.create`, polling `retrieve`, `results()`; the items
 * run by the gateway through `/v1/messages` on a jobs worker, served by any connection.
 */
describe('message batches on the Anthropic wire, run by the gateway', () => {
  const prefix = uniquePrefix('msgbatches');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.001', GW_ALLOW_PRIVATE_NETWORK: 'true', GW_BATCH_CHUNK_ITEMS: '4' };
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  let sdk: Anthropic;

  const ended = (client: Anthropic, id: string) => until(async () => {
    const batch = await client.messages.batches.retrieve(id);
    return batch.processing_status === 'ended' ? batch : null;
  }, `message batch ${id} ending`, 60_000, 100);
  const resultsOf = async (client: Anthropic, id: string) => {
    const out = [];
    for await (const line of await client.messages.batches.results(id)) out.push(line);
    return out;
  };

  beforeAll(async () => {
    f = await startChatFixture(env);
    workers = await startTestWorkers(['jobs'], prefix, env);
    await f.gatewayRunRoute(await f.connect('anthropic'), 'claude-3-5-haiku-latest', HAIKU);
    await f.connect('openai');
    sdk = new Anthropic({ apiKey: await f.key({ rate_limit_rpm: 50000 }), baseURL: f.api.url, maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await workers?.shutdown();
    await f?.close();
  });

  it('runs each request through the Messages path and gives every result once, in order', async () => {
    const requests = [...Array.from({ length: 9 }, (_, i) => request(`claude-${i}`, `question ${i}`)), request('served-by-openai', 'hello', 'gpt-4o-mini')];
    const created = await sdk.messages.batches.create({ requests });
    expect(created).toMatchObject({ type: 'message_batch', processing_status: 'in_progress', results_url: null });
    expect(created.id).toMatch(/^msgbatch_/);

    const batch = await ended(sdk, created.id);
    expect(batch.request_counts).toEqual({ processing: 0, succeeded: 10, errored: 0, canceled: 0, expired: 0 });
    expect(batch.ended_at).not.toBeNull();
    expect(batch.results_url).toBe(`${f.api.url}/v1/messages/batches/${created.id}/results`);

    const results = await resultsOf(sdk, created.id);
    expect(results.map((r) => r.custom_id)).toEqual(requests.map((r) => r.custom_id));
    for (const line of results) {
      expect(line.result.type).toBe('succeeded');
      if (line.result.type === 'succeeded') expect(line.result.message).toMatchObject({ type: 'message', role: 'assistant', content: [expect.objectContaining({ type: 'text' })] });
    }
    // An OpenAI connection served the gpt request, translated to Messages on the way back.
    const gpt = results.at(-1)!;
    expect(gpt.result.type === 'succeeded' && gpt.result.message.model).toBe('gpt-4o-mini');
    const logged = await until(async () => {
      const rows = await f.database.db.select().from(requestLogs).where(eq(requestLogs.batchId, created.id));
      return rows.length === 10 ? rows : null;
    }, 'the items\' request-log rows');
    expect(new Set(logged.map((r) => r.endpoint))).toEqual(new Set(['messages']));

    // Listed, then deleted with its files once ended.
    const listed = [];
    for await (const b of sdk.messages.batches.list({ limit: 2 })) listed.push(b.id);
    expect(listed).toContain(created.id);
    await saveHistory('batch-run-anthropic', created.id);
    expect(await sdk.messages.batches.delete(created.id)).toEqual({ id: created.id, type: 'message_batch_deleted' });
    await expect(sdk.messages.batches.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
  });

  it('refuses a bad request at create, naming it, and keeps nothing', async () => {
    const before = (await f.database.db.select({ id: batches.id }).from(batches)).length;
    await expect(sdk.messages.batches.create({ requests: [request('ok', 'x'), request('bad id!', 'y')] })).rejects.toMatchObject({
      status: 400, error: { type: 'error', error: expect.objectContaining({ type: 'invalid_request_error', message: expect.stringContaining('requests.1.custom_id') }) },
    });
    await expect(sdk.messages.batches.create({ requests: [request('dup', 'x'), request('dup', 'y')] })).rejects.toMatchObject({ status: 400 });
    const noTokens = { custom_id: 'n', params: { model: 'claude-3-5-haiku-latest', messages: [{ role: 'user', content: 'x' }] } };
    await expect(sdk.messages.batches.create({ requests: [noTokens as never] })).rejects.toMatchObject({ status: 400 });
    const malformed = await fetch(`${f.api.url}/v1/messages/batches`, { method: 'POST', headers: { 'x-api-key': sdk.apiKey!, 'content-type': 'application/json' }, body: '{"requests": [{"custom_id": "a"' });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
    expect((await f.database.db.select({ id: batches.id }).from(batches)).length).toBe(before);
  });

  it('cancels mid-batch: finished results kept, the rest canceled', async () => {
    const created = await sdk.messages.batches.create({ requests: Array.from({ length: 24 }, (_, i) => request(`slow-${i}`, `slow ${i} [sandbox delay_ms=300]`)) });
    await until(async () => (await sdk.messages.batches.retrieve(created.id)).request_counts.succeeded >= 4, 'some results', 30_000, 50);
    const canceling = await sdk.messages.batches.cancel(created.id);
    expect(canceling.processing_status).toBe('canceling');
    expect(canceling.cancel_initiated_at).not.toBeNull();
    const batch = await ended(sdk, created.id);
    expect(batch.request_counts.canceled).toBeGreaterThan(0);
    expect(batch.request_counts.succeeded + batch.request_counts.canceled).toBe(24);
    const results = await resultsOf(sdk, created.id);
    expect(results).toHaveLength(24);
    expect(results.filter((r) => r.result.type === 'canceled')).toHaveLength(batch.request_counts.canceled);
  });

  it('shows a key only its own batches', async () => {
    const created = await sdk.messages.batches.create({ requests: [request('mine', 'x')] });
    const other = new Anthropic({ apiKey: await f.key({ rate_limit_rpm: 50000 }), baseURL: f.api.url, maxRetries: 0 });
    await expect(other.messages.batches.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.messages.batches.cancel(created.id)).rejects.toMatchObject({ status: 404 });
    await ended(sdk, created.id);
    await expect(other.messages.batches.results(created.id)).rejects.toMatchObject({ status: 404 });
  });
});
