import Anthropic from '@anthropic-ai/sdk';
import { eq, like } from 'drizzle-orm';
import OpenAI, { toFile } from 'openai';
import { batches, batchItems, requestLogs, spendLedger } from '../../core/db/schema';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { saveHistory } from '../helpers/histories';
import { until } from '../helpers/until';
import { chatLine as batchLine, openAIBatches, type OutputLine } from '../helpers/openai-batches';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

const chatLine = (customId: string, content: string, extra: Record<string, unknown> = {}) => batchLine(customId, content, 'gpt-4o-mini', extra);

/**
 * Batches run on the providers' own batch APIs (issue 56): a batch of one model whose route's
 * first connection has one (OpenAI, Azure OpenAI, Anthropic) is sent to it as a provider batch,
 * followed with status checks, and its results mapped back to the items by line; each item is
 * priced at the batch rate (half) and the key's limits hold its worst case part by part. The
 * sandbox speaks both wires and bills their requests at the batch tier: the provider's bill is
 * the oracle for what the gateway charged.
 */
describe('batches run natively by the provider', () => {
  const prefix = uniquePrefix('nbatch');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.001', GW_ALLOW_PRIVATE_NETWORK: 'true', GW_BATCH_CHUNK_ITEMS: '5' };
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  let openai: OpenAI;
  let anthropic: Anthropic;
  const { clientFor, upload, ended, linesOf } = openAIBatches(() => f.api.url);
  /** The provider batches the sandbox was asked to create. */
  const providerCreates = (path: string) => f.sandbox.received.filter((r) => r.path.endsWith(path) && r.headers['content-type']?.includes('json')).length;
  /** What the sandbox billed at the batch tier, in nano-dollars, for these provider request ids (`<provider batch>:l<line>`). */
  const billedNanos = (secret: string) => Math.round(f.sandbox.bill.lines(secret).filter((l) => l.tier === 'batch').reduce((sum, l) => sum + (l.usd ?? 0), 0) * 1e9);
  const rowOf = async (id: string) => (await f.database.db.select().from(batches).where(eq(batches.id, id)))[0]!;

  beforeAll(async () => {
    f = await startChatFixture(env);
    workers = await startTestWorkers(['jobs'], prefix, env);
    await f.connect('openai', { secret: 'sk-sandbox-native-openai' });
    await f.connect('anthropic', { secret: 'sk-sandbox-native-anthropic' });
    openai = clientFor(await f.key({ rate_limit_rpm: 50000 }));
    anthropic = new Anthropic({ apiKey: await f.key({ rate_limit_rpm: 50000 }), baseURL: f.api.url, maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await workers?.shutdown();
    await f?.close();
  });

  it('sends an OpenAI-wire batch to OpenAI\'s Batch API and gives every answer once, at the batch price', async () => {
    const before = billedNanos('sk-sandbox-native-openai');
    const createsBefore = providerCreates('/openai/v1/batches');
    const file = await upload(openai, Array.from({ length: 12 }, (_, i) => chatLine(`n-${i}`, `native question ${i}`)));
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(openai, created.id);
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 12, completed: 12, failed: 0 });
    // One provider batch, not twelve chat calls.
    expect(providerCreates('/openai/v1/batches') - createsBefore).toBe(1);
    expect(f.sandbox.received.filter((r) => r.path.endsWith('/openai/v1/chat/completions') && JSON.stringify(r.body).includes('native question'))).toHaveLength(0);

    const output = await linesOf(openai, batch.output_file_id);
    expect(output.map((l) => l.custom_id)).toEqual(Array.from({ length: 12 }, (_, i) => `n-${i}`));
    for (const line of output) {
      expect(line.response!.status_code).toBe(200);
      expect(line.response!.body).toMatchObject({ object: 'chat.completion', choices: [{ message: { role: 'assistant' } }] });
    }
    // The cost is the provider's batch bill: half the list price, item by item.
    const row = await rowOf(created.id);
    const billed = billedNanos('sk-sandbox-native-openai') - before;
    expect(billed).toBeGreaterThan(0);
    expect(Math.abs(row.costNanos - billed)).toBeLessThanOrEqual(12);
    const costs = output.map((l) => (l.response!.body.usage as { cost: number }).cost);
    expect(Math.round(costs.reduce((a, b) => a + b, 0) * 1e9)).toBe(row.costNanos);
    // Each part's hold settled at what its items cost.
    const holds = await f.database.db.select().from(spendLedger).where(like(spendLedger.jobId, `${created.id}.p%`));
    expect(holds.map((h) => h.state)).toEqual(['settled', 'settled', 'settled']);
    expect(Math.round(holds.reduce((sum, h) => sum + Number(h.amount), 0) * 1e9)).toBe(row.costNanos);
    expect(row.native).toMatchObject({ plan: { kind: 'openai', upstreamModel: 'gpt-4o-mini' }, heldParts: 3 });
    // Each item is in the request log, with the batch's id and its cost, as a request would be.
    const logged = await f.database.db.select().from(requestLogs).where(eq(requestLogs.batchId, created.id));
    expect(logged).toHaveLength(12);
    expect(logged.every((l) => l.provider === 'openai' && l.status === 200 && l.endpoint === 'chat.completions' && (l.usage as { prompt_tokens?: number }).prompt_tokens! > 0)).toBe(true);
    expect(Math.round(logged.reduce((sum, l) => sum + Number(l.cost), 0) * 1e9)).toBe(row.costNanos);
    const items = await f.database.db.select().from(batchItems).where(eq(batchItems.batchId, created.id));
    expect(new Set(items.map((i) => i.requestId))).toEqual(new Set(logged.map((l) => l.id)));
    // What the batch left at the provider is deleted there once read: the prompts live on only
    // in the gateway's own files, under the organization's retention.
    const providerFile = await fetch(`${f.sandbox.url}/openai/v1/files/${row.native!.providerInputFileId}`, { headers: { authorization: 'Bearer sk-sandbox-native-openai' } });
    expect(providerFile.status).toBe(404);
    expect(row.native).toMatchObject({ collected: 'completed' });
    // Operators see who ran it.
    expect((await f.client.get(`/batches/${created.id}`)).body).toMatchObject({ run_by: 'provider', progress: 1, request_counts: { total: 12, completed: 12 } });
    await saveHistory('batch-run-native', created.id);
  });

  it('sends an embeddings batch to OpenAI\'s Batch API, priced per input token at the batch rate', async () => {
    const before = billedNanos('sk-sandbox-native-openai');
    const lines = Array.from({ length: 5 }, (_, i) => JSON.stringify({ custom_id: `emb-${i}`, method: 'POST', url: '/v1/embeddings', body: { model: 'text-embedding-3-small', input: [`embed ${i} words here`] } }));
    const file = await upload(openai, lines);
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: '24h' });
    const batch = await ended(openai, created.id);
    expect(batch.request_counts).toEqual({ total: 5, completed: 5, failed: 0 });
    const output = await linesOf(openai, batch.output_file_id);
    expect(output.map((l) => l.custom_id)).toEqual(['emb-0', 'emb-1', 'emb-2', 'emb-3', 'emb-4']);
    for (const line of output) expect(line.response!.body).toMatchObject({ object: 'list', data: [{ object: 'embedding', index: 0 }], usage: { prompt_tokens: 4 } });
    const row = await rowOf(created.id);
    expect(row.native).toMatchObject({ plan: { kind: 'openai', endpoint: '/v1/embeddings', upstreamModel: 'text-embedding-3-small' } });
    const billed = billedNanos('sk-sandbox-native-openai') - before;
    expect(billed).toBeGreaterThan(0);
    expect(Math.abs(row.costNanos - billed)).toBeLessThanOrEqual(5);
    const logged = await f.database.db.select().from(requestLogs).where(eq(requestLogs.batchId, created.id));
    expect(logged.map((l) => l.endpoint)).toEqual(Array(5).fill('embeddings'));
  });

  it('sends a Messages batch to Anthropic\'s Message Batches and maps each result back by its custom_id', async () => {
    const before = billedNanos('sk-sandbox-native-anthropic');
    const requests = Array.from({ length: 7 }, (_, i) => ({ custom_id: `m-${i}`, params: { model: 'claude-3-5-haiku-latest', max_tokens: 64, messages: [{ role: 'user' as const, content: `anthropic native ${i}` }] } }));
    const created = await anthropic.messages.batches.create({ requests });
    const batch = await until(async () => {
      const read = await anthropic.messages.batches.retrieve(created.id);
      return read.processing_status === 'ended' ? read : null;
    }, 'the message batch ending', 60_000, 100);
    expect(batch.request_counts).toEqual({ processing: 0, succeeded: 7, errored: 0, canceled: 0, expired: 0 });
    expect(providerCreates('/anthropic/v1/messages/batches')).toBeGreaterThanOrEqual(1);
    const results = [];
    for await (const line of await anthropic.messages.batches.results(created.id)) results.push(line);
    expect(results.map((r) => r.custom_id)).toEqual(requests.map((r) => r.custom_id));
    for (const r of results) expect(r.result).toMatchObject({ type: 'succeeded', message: { type: 'message', role: 'assistant' } });
    const row = await rowOf(created.id);
    expect(row.native).toMatchObject({ plan: { kind: 'anthropic', wire: 'anthropic' } });
    const providerBatch = await fetch(`${f.sandbox.url}/anthropic/v1/messages/batches/${row.native!.providerBatchId}`, { headers: { 'x-api-key': 'sk-sandbox-native-anthropic' } });
    expect(providerBatch.status).toBe(404);
    expect(Math.abs(row.costNanos - (billedNanos('sk-sandbox-native-anthropic') - before))).toBeLessThanOrEqual(7);
    expect(row.costNanos).toBeGreaterThan(0);
  });

  it('passes a cancel on to the provider mid-batch and keeps the answers it finished', async () => {
    const file = await upload(openai, Array.from({ length: 20 }, (_, i) => chatLine(`c-${i}`, `slow ${i}${i === 0 ? ' [sandbox batch_item_ms=150]' : ''}`)));
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await until(async () => (await rowOf(created.id)).native?.providerBatchId ? true : null, 'the provider batch created', 30_000, 20);
    await new Promise((r) => setTimeout(r, 700));
    await openai.batches.cancel(created.id);
    const batch = await ended(openai, created.id);
    expect(batch.status).toBe('cancelled');
    const output = await linesOf(openai, batch.output_file_id);
    const errors = await linesOf(openai, batch.error_file_id);
    expect(output.length).toBeGreaterThan(0);
    expect(output.length).toBeLessThan(20);
    expect(errors.every((l) => l.error?.code === 'batch_cancelled')).toBe(true);
    expect([...output, ...errors].map((l) => l.custom_id).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `c-${i}`).sort());
    expect(f.sandbox.received.some((r) => r.path.endsWith('/cancel') && r.path.includes('/openai/v1/batches/'))).toBe(true);
    await saveHistory('batch-run-native-cancelled', created.id);
  });

  it('passes a cancel of a Messages batch on to Anthropic: finished results kept, the rest canceled', async () => {
    const requests = Array.from({ length: 12 }, (_, i) => ({ custom_id: `mc-${i}`, params: { model: 'claude-3-5-haiku-latest', max_tokens: 32, messages: [{ role: 'user' as const, content: `slow ${i}${i === 0 ? ' [sandbox batch_item_ms=150]' : ''}` }] } }));
    const created = await anthropic.messages.batches.create({ requests });
    await until(async () => (await rowOf(created.id)).native?.providerBatchId ? true : null, 'the provider batch created', 30_000, 20);
    await new Promise((r) => setTimeout(r, 500));
    expect((await anthropic.messages.batches.cancel(created.id)).processing_status).toBe('canceling');
    const batch = await until(async () => {
      const read = await anthropic.messages.batches.retrieve(created.id);
      return read.processing_status === 'ended' ? read : null;
    }, 'the message batch ending', 60_000, 100);
    expect(batch.request_counts.succeeded).toBeGreaterThan(0);
    expect(batch.request_counts.canceled).toBeGreaterThan(0);
    expect(batch.request_counts.succeeded + batch.request_counts.canceled).toBe(12);
    const results = [];
    for await (const line of await anthropic.messages.batches.results(created.id)) results.push(line);
    expect(results.map((r) => r.custom_id)).toEqual(requests.map((r) => r.custom_id));
    expect(results.filter((r) => r.result.type === 'canceled')).toHaveLength(batch.request_counts.canceled);
    expect(f.sandbox.received.some((r) => r.path.endsWith('/cancel') && r.path.includes('/anthropic/v1/messages/batches/'))).toBe(true);
  });

  it('fails the batch the provider failed, and gives its holds back', async () => {
    const file = await upload(openai, [chatLine('f-0', 'doomed [sandbox batch_fail]'), chatLine('f-1', 'doomed too')]);
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(openai, created.id);
    expect(batch.status).toBe('failed');
    expect(batch.errors?.data?.[0]?.message).toContain('the provider failed it');
    const holds = await f.database.db.select().from(spendLedger).where(like(spendLedger.jobId, `${created.id}.p%`));
    expect(holds.map((h) => h.state)).toEqual(['released']);
  });

  it('fails a batch the provider refused to take, and gives its holds back', async () => {
    const file = await upload(openai, [chatLine('r-0', 'refused [sandbox batch_refuse]'), chatLine('r-1', 'refused too')]);
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(openai, created.id);
    expect(batch.status).toBe('failed');
    expect(batch.errors?.data?.[0]?.message).toContain('The provider refused the batch (HTTP 400)');
    expect(batch.errors?.data?.[0]?.message).not.toContain('sk-sandbox');
    const holds = await f.database.db.select().from(spendLedger).where(like(spendLedger.jobId, `${created.id}.p%`));
    expect(holds.map((h) => h.state)).toEqual(['released']);
    expect((await rowOf(created.id)).native).toMatchObject({ submitting: false });
  });

  it('runs a batch whose items ask for the gateway\'s routing or cache by the gateway, and sends no gateway field to the provider', async () => {
    const routed = await upload(openai, [chatLine('x-0', 'with fallbacks', { fallbacks: ['anthropic/claude-3-5-haiku-latest'] }), chatLine('x-1', 'plain')]);
    const viaGateway = await openai.batches.create({ input_file_id: routed.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect((await ended(openai, viaGateway.id)).request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
    expect((await rowOf(viaGateway.id)).native).toBeNull();
    // `metadata` and `logging` alone leave a batch native (they are the gateway's, and are not
    // sent: test/unit/native-batch-wire.test.ts).
    const tagged = await upload(openai, [chatLine('t-0', 'tagged item', { metadata: { user_id: 'u-1' }, logging: false })]);
    const uploadsBefore = f.sandbox.received.filter((r) => r.path.endsWith('/openai/v1/files')).length;
    const native = await openai.batches.create({ input_file_id: tagged.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(openai, native.id);
    expect(batch.request_counts).toEqual({ total: 1, completed: 1, failed: 0 });
    expect((await rowOf(native.id)).native).not.toBeNull();
    expect(f.sandbox.received.filter((r) => r.path.endsWith('/openai/v1/files')).length).toBe(uploadsBefore + 1);
  });

  it('fails a batch whose provider stops knowing it, keeping what it held as charged: the provider may have run and billed it', async () => {
    const limited = clientFor(await f.key({ rate_limit_rpm: 50000, credit_limit: { amount: 100, period: 'never' } }));
    const file = await upload(limited, Array.from({ length: 6 }, (_, i) => chatLine(`u-${i}`, `unknown ${i}${i === 0 ? ' [sandbox batch_item_ms=100,batch_check_status=404]' : ''}`)));
    const created = await limited.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(limited, created.id);
    expect(batch.status).toBe('failed');
    expect(batch.errors?.data?.[0]?.message).toContain('The provider refused a status check of the batch (HTTP 404)');
    const holds = await f.database.db.select().from(spendLedger).where(like(spendLedger.jobId, `${created.id}.p%`));
    expect(holds.length).toBe(2);
    for (const hold of holds) {
      expect(hold.state).toBe('settled');
      expect(Number(hold.amount)).toBeGreaterThan(0);
    }
    // It was asked to stop.
    const providerBatchId = (await rowOf(created.id)).native!.providerBatchId!;
    expect(f.sandbox.received.some((r) => r.path.includes(providerBatchId) && r.path.endsWith('/cancel'))).toBe(true);
  });

  it('ends a batch whose provider window ran out as expired, with the answers it has', async () => {
    const file = await upload(openai, Array.from({ length: 6 }, (_, i) => chatLine(`e-${i}`, `late ${i}${i === 0 ? ' [sandbox batch_expire]' : ''}`)));
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(openai, created.id);
    expect(batch.status).toBe('expired');
    expect((await linesOf(openai, batch.output_file_id)).map((l) => l.custom_id)).toEqual(['e-0', 'e-1', 'e-2']);
    expect((await linesOf(openai, batch.error_file_id)).map((l) => [l.custom_id, l.error?.code])).toEqual([['e-3', 'batch_expired'], ['e-4', 'batch_expired'], ['e-5', 'batch_expired']]);
  });

  it('holds the worst case part by part: the parts past a spend limit end with its code, and the limit holds', async () => {
    // Dear output for this model here: each item's worst case (64 tokens out) is about 0.32 cents at the batch rate.
    expect((await f.client.post('/model_prices', { model: 'openai/gpt-4o', provider: 'openai', input_per_million: 0, output_per_million: 100 })).status).toBe(201);
    await f.settle();
    const limited = clientFor(await f.key({ credit_limit: { amount: 0.04, period: 'never' }, rate_limit_rpm: 50000 }));
    const file = await upload(limited, Array.from({ length: 30 }, (_, i) => chatLine(`b-${i}`, `budget ${i}`, { model: 'openai/gpt-4o', max_tokens: 64 })));
    const created = await limited.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(limited, created.id);
    expect(batch.status).toBe('completed');
    const row = await rowOf(created.id);
    const held = row.native!.heldParts!;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(6);
    expect(batch.request_counts).toEqual({ total: 30, completed: held * 5, failed: 30 - held * 5 });
    for (const line of await linesOf(limited, batch.error_file_id)) {
      expect(line.response!.status_code).toBe(402);
      expect(line.response!.body).toMatchObject({ error: { type: 'budget_exceeded', code: 'key_lifetime_limit' } });
    }
    expect(row.costNanos).toBeGreaterThan(0);
    expect(row.costNanos).toBeLessThanOrEqual(40_000_000);
  });

  it('runs a route\'s batches by the gateway when the route says so', async () => {
    const [connection] = (await f.client.get<{ data: Array<{ id: string; kind: string }> }>('/provider_connections')).body.data.filter((c) => c.kind === 'openai');
    const slug = `gwrun${Date.now()}`;
    const route = await f.client.post<{ batch_mode: string }>('/routes', { slug, targets: [{ connection_id: connection!.id, model: 'gpt-4o-mini' }], batch_mode: 'gateway' });
    expect(route.status).toBe(201);
    expect(route.body.batch_mode).toBe('gateway');
    await f.settle();
    const file = await upload(openai, [chatLine('g-0', 'by the gateway', { model: slug }), chatLine('g-1', 'by the gateway too', { model: slug })]);
    const created = await openai.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(openai, created.id);
    expect(batch.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
    expect((await rowOf(created.id)).native).toBeNull();
    // Through the chat path: each item in the request log with the batch's id (written a moment after).
    await until(async () => (await f.database.db.select().from(requestLogs).where(eq(requestLogs.batchId, created.id))).length === 2 || null, 'the items in the request log', 10_000, 100);
  });
});

/** Azure OpenAI's Batch API: the deployment the connection maps the model to, its `/chat/completions` endpoint, its `api-version`. */
describe('a native batch on Azure OpenAI', () => {
  const prefix = uniquePrefix('nbazure');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.001', GW_ALLOW_PRIVATE_NETWORK: 'true' };
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;

  beforeAll(async () => {
    f = await startChatFixture(env);
    workers = await startTestWorkers(['jobs'], prefix, env);
    await f.connect('azure_openai', { extra: { model_map: { 'gpt-4o-mini': 'prod-mini' } } });
  }, 120_000);
  afterAll(async () => {
    await workers?.shutdown();
    await f?.close();
  });

  it('sends the batch to the deployment and prices it as the model it was mapped from, at the batch rate', async () => {
    const sdk = openAIBatches(() => f.api.url).clientFor(await f.key({ rate_limit_rpm: 50000 }));
    const lines = Array.from({ length: 4 }, (_, i) => chatLine(`az-${i}`, `azure ${i}`));
    const file = await sdk.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'azure.jsonl'), purpose: 'batch' });
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await until(async () => {
      const read = await sdk.batches.retrieve(created.id);
      return read.status === 'completed' ? read : null;
    }, 'the batch completing', 60_000, 100);
    expect(batch.request_counts).toEqual({ total: 4, completed: 4, failed: 0 });
    const create = f.sandbox.received.find((r) => /^\/azure\/openai\/batches\?/.test(r.path));
    expect(create?.path).toContain('api-version=');
    const output = (await (await sdk.files.content(batch.output_file_id!)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as OutputLine);
    expect(output.map((l) => l.custom_id)).toEqual(['az-0', 'az-1', 'az-2', 'az-3']);
    const [row] = await f.database.db.select().from(batches).where(eq(batches.id, created.id));
    expect(row!.native).toMatchObject({ plan: { kind: 'azure_openai', upstreamModel: 'prod-mini' } });
    expect(row!.costNanos).toBeGreaterThan(0);
  });
});

/**
 * A native batch whose jobs worker dies while the provider runs it (SIGKILL): the next worker
 * goes on following the same provider batch (never sending a second), and records each item once.
 */
describe('a native batch whose worker is killed', () => {
  const prefix = uniquePrefix('nbkill');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.001', GW_ALLOW_PRIVATE_NETWORK: 'true', GW_BATCH_CHUNK_ITEMS: '5' };
  let f: ChatFixture;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    f = await startChatFixture(env);
    await f.connect('openai');
  }, 120_000);
  afterAll(async () => {
    for (const w of workers) await w.stop();
    await f?.close();
  });

  it('follows the one provider batch to its end on another worker, each item recorded once', async () => {
    const sdk = openAIBatches(() => f.api.url).clientFor(await f.key({ rate_limit_rpm: 50000 }));
    const lines = Array.from({ length: 15 }, (_, i) => chatLine(`k-${i}`, `killed ${i}${i === 0 ? ' [sandbox batch_item_ms=100]' : ''}`));
    const file = await sdk.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'kill.jsonl'), purpose: 'batch' });
    const first = await startWorkerProcess('jobs', prefix, env);
    workers.push(first);
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await until(async () => (await f.database.db.select().from(batches).where(eq(batches.id, created.id)))[0]?.native?.providerBatchId ? true : null, 'the provider batch created', 30_000, 20);
    await first.kill();
    workers.push(await startWorkerProcess('jobs', prefix, env));
    const batch = await until(async () => {
      const read = await sdk.batches.retrieve(created.id);
      return read.status === 'completed' ? read : null;
    }, 'the batch completing on the second worker', 120_000, 200);
    expect(batch.request_counts).toEqual({ total: 15, completed: 15, failed: 0 });
    const output = (await (await sdk.files.content(batch.output_file_id!)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { custom_id: string });
    expect(output.map((l) => l.custom_id)).toEqual(Array.from({ length: 15 }, (_, i) => `k-${i}`));
    expect(f.sandbox.received.filter((r) => r.path.endsWith('/openai/v1/batches'))).toHaveLength(1);
    expect(await f.database.db.select().from(batchItems).where(eq(batchItems.batchId, created.id))).toHaveLength(15);
  });
});
