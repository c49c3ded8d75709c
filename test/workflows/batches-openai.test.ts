import { eq } from 'drizzle-orm';
import type OpenAI from 'openai';
import { sha256Hex } from '../../core/crypto/secrets';
import { batches, batchItems, gatewayKeys, requestLogs } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { manageClient } from '../helpers/manage-client';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { saveHistory } from '../helpers/histories';
import { createLocalCa, type LocalCa } from '../helpers/local-ca';
import { until } from '../helpers/until';
import { chatLine as batchLine, openAIBatches } from '../helpers/openai-batches';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/** A day's completion window lasts about 86 s here; retries after our own errors come within milliseconds. */
const SCALE = 0.001;

/**
 * The routes the items name: OpenAI has a batch API, so a batch naming its models directly would
 * go to it (batches-native.test.ts); these routes keep their batches on the gateway's path.
 */
const MINI = 'gwrun-mini';
const DEAR = 'gwrun-4o';

const chatLine = (customId: string, content: string, extra: Record<string, unknown> = {}) => batchLine(customId, content, MINI, extra);

/**
 * OpenAI's Batch API through the gateway (issue 56), with the unmodified `openai` SDK: a JSONL
 * file uploaded, a batch created and polled, its output read back; every item run by the
 * gateway through its own request path on a jobs worker.
 */
describe('batches on the OpenAI wire, run by the gateway', () => {
  const prefix = uniquePrefix('batches');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true' };
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  let sdk: OpenAI;
  let ca: LocalCa;
  let receiver: WebhookReceiver;
  let webhooksWorker: WorkerProcess | null = null;
  /** The batch events the organization's endpoint received, by batch id. */
  const eventsOf = (batchId: string) => receiver.received('/batches').map((r) => JSON.parse(r.body) as { type: string; data: { id: string; status: string } }).filter((e) => e.data.id === batchId);

  const { clientFor, upload, ended, linesOf } = openAIBatches(() => f.api.url);

  beforeAll(async () => {
    ca = createLocalCa();
    receiver = await startWebhookReceiver(ca);
    f = await startChatFixture(env);
    workers = await startTestWorkers(['jobs'], prefix, env);
    webhooksWorker = await startWorkerProcess('webhooks', prefix, { ...env, NODE_EXTRA_CA_CERTS: ca.caFile });
    const openai = await f.connect('openai');
    await f.gatewayRunRoute(openai, 'gpt-4o-mini', MINI);
    await f.gatewayRunRoute(openai, 'gpt-4o', DEAR);
    sdk = clientFor(await f.key({ rate_limit_rpm: 50000 }));
    // An endpoint that names the batch events (an extension: by default an endpoint takes the job events only).
    const endpoint = await f.client.post<{ events: string[] }>('/webhook_endpoints', { url: receiver.url('/batches'), events: ['batch.completed', 'batch.failed', 'batch.cancelled'] });
    expect(endpoint.status).toBe(201);
    expect(endpoint.body.events).toEqual(['batch.completed', 'batch.failed', 'batch.cancelled']);
    await f.settle();
  }, 120_000);
  afterAll(async () => {
    await webhooksWorker?.stop();
    await workers?.shutdown();
    await f?.close();
    await receiver?.close();
  });

  it('runs every item through the chat path and writes each answer once, in order, in the output file', async () => {
    const file = await upload(sdk, Array.from({ length: 12 }, (_, i) => chatLine(`item-${i}`, `question ${i}`)));
    expect(file).toMatchObject({ object: 'file', purpose: 'batch', status: 'processed', filename: 'input.jsonl' });
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'eval-1' } });
    expect(created).toMatchObject({ object: 'batch', status: 'validating', input_file_id: file.id, endpoint: '/v1/chat/completions', metadata: { run: 'eval-1' } });

    const batch = await ended(sdk, created.id);
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 12, completed: 12, failed: 0 });
    expect(batch.error_file_id).toBeNull();
    expect(batch.completed_at).toBeGreaterThanOrEqual(batch.created_at);

    const output = await linesOf(sdk, batch.output_file_id);
    expect(output.map((l) => l.custom_id)).toEqual(Array.from({ length: 12 }, (_, i) => `item-${i}`));
    for (const line of output) {
      expect(line.error).toBeNull();
      expect(line.response!.status_code).toBe(200);
      expect(line.response!.body).toMatchObject({ object: 'chat.completion', choices: [expect.objectContaining({ message: expect.objectContaining({ role: 'assistant' }) })] });
      expect(line.response!.request_id).toBe(line.response!.body.id);
    }
    // Each item is one request-log row naming the batch, and one sandbox call.
    await f.settle();
    const logged = await until(async () => {
      const rows = await f.database.db.select().from(requestLogs).where(eq(requestLogs.batchId, created.id));
      return rows.length === 12 ? rows : null;
    }, 'the items\' request-log rows');
    expect(new Set(logged.map((r) => r.id))).toEqual(new Set(output.map((l) => l.response!.request_id)));
    const [row] = await f.database.db.select().from(batches).where(eq(batches.id, created.id));
    expect(row!.rerun).toBe(0);
    // The output file is listed among the key's files, as a batch output.
    const listed = [];
    for await (const listedFile of sdk.files.list({ purpose: 'batch_output' })) listed.push(listedFile.id);
    expect(listed).toContain(batch.output_file_id);
    await saveHistory('batch-run-completed', created.id);
    // Its ending is a signed event to the endpoint that named it, with the batch as a read shows it.
    const [event] = await until(async () => (eventsOf(created.id).length > 0 ? eventsOf(created.id) : null), 'the batch.completed event');
    expect(event).toMatchObject({ type: 'batch.completed', data: { id: created.id, status: 'completed', request_counts: { total: 12, completed: 12, failed: 0 } } });
    expect(String(receiver.received('/batches').find((r) => r.body.includes(created.id))!.headers['gw-signature'])).toMatch(/^t=\d+,v1=[0-9a-f]{64}/);
  });

  it('fails a batch whose input has a bad line, naming the line, and runs none of it', async () => {
    const before = f.sandbox.received.length;
    const file = await upload(sdk, [chatLine('a', 'fine'), '{"custom_id": "b", "method": "POST", "url": "/v1/embeddings", "body": {"model": "x"}}', 'not json', chatLine('a', 'duplicate id')]);
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(sdk, created.id);
    expect(batch.status).toBe('failed');
    expect(batch.failed_at).not.toBeNull();
    expect(batch.errors!.data).toEqual([
      expect.objectContaining({ code: 'mismatched_endpoint', line: 2, param: 'url' }),
      expect.objectContaining({ code: 'invalid_json_line', line: 3 }),
      expect.objectContaining({ code: 'duplicate_custom_id', line: 4, param: 'custom_id' }),
    ]);
    expect(f.sandbox.received.length).toBe(before);
    await saveHistory('batch-run-bad-line', created.id);
    await until(async () => eventsOf(created.id).some((e) => e.type === 'batch.failed'), 'the batch.failed event');
  });

  it('refuses a batch whose file or endpoint is wrong with the spec\'s error body', async () => {
    await expect(sdk.batches.create({ input_file_id: 'file_nope', endpoint: '/v1/chat/completions', completion_window: '24h' })).rejects.toMatchObject({ status: 404, error: expect.objectContaining({ code: 'resource_not_found' }) });
    const file = await upload(sdk, [chatLine('a', 'x')]);
    await expect(sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/completions' as '/v1/chat/completions', completion_window: '24h' })).rejects.toMatchObject({ status: 400, error: expect.objectContaining({ type: 'invalid_request_error' }) });
  });

  it('keeps the finished items of a cancelled batch and names the rest cancelled', async () => {
    const file = await upload(sdk, Array.from({ length: 40 }, (_, i) => chatLine(`slow-${i}`, `slow ${i} [sandbox delay_ms=300]`)));
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await until(async () => ((await sdk.batches.retrieve(created.id)).request_counts?.completed ?? 0) >= 8, 'some items answered', 30_000, 50);
    const cancelling = await sdk.batches.cancel(created.id);
    expect(cancelling.status).toBe('cancelling');
    expect(cancelling.cancelling_at).not.toBeNull();
    const batch = await ended(sdk, created.id);
    expect(batch.status).toBe('cancelled');
    const output = await linesOf(sdk, batch.output_file_id);
    const errors = await linesOf(sdk, batch.error_file_id);
    expect(output.length).toBe(batch.request_counts!.completed);
    expect(output.length).toBeLessThan(40);
    expect(output.length + errors.length).toBe(40);
    expect(errors.every((l) => l.error?.code === 'batch_cancelled' && l.response === null)).toBe(true);
    // Cancelling an ended batch is refused.
    await expect(sdk.batches.cancel(created.id)).rejects.toMatchObject({ status: 400 });
    await saveHistory('batch-run-cancelled', created.id);
    await until(async () => eventsOf(created.id).some((e) => e.type === 'batch.cancelled' && e.data.status === 'cancelled'), 'the batch.cancelled event');
  });

  it('ends the items past a spend limit as errors with the budget code, and keeps the limit', async () => {
    // gpt-4o made dear here (only this test calls it): an answer of a few tokens costs about a tenth of a cent, the hold for 20 at most two.
    expect((await f.client.post('/model_prices', { model: 'openai/gpt-4o', provider: 'openai', input_per_million: 0, output_per_million: 100 })).status).toBe(201);
    await f.settle();
    const limited = clientFor(await f.key({ credit_limit: { amount: 0.01, period: 'never' }, rate_limit_rpm: 50000 }));
    const file = await upload(limited, Array.from({ length: 30 }, (_, i) => chatLine(`b-${i}`, `budget ${i}`, { model: DEAR, max_tokens: 20 })));
    const created = await limited.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await ended(limited, created.id);
    expect(batch.status).toBe('completed');
    const errors = await linesOf(limited, batch.error_file_id);
    expect(errors.length).toBeGreaterThan(0);
    expect(batch.request_counts!.failed).toBe(errors.length);
    for (const line of errors) {
      expect(line.response!.status_code).toBe(402);
      expect(line.response!.body).toMatchObject({ error: { type: 'budget_exceeded', code: 'key_lifetime_limit' } });
    }
    const [row] = await f.database.db.select().from(batches).where(eq(batches.id, created.id));
    // The limit held: what the items cost stays within it, and the batch says what that was.
    expect(row!.costNanos).toBeGreaterThan(0);
    expect(row!.costNanos).toBeLessThanOrEqual(10_000_000);
    expect(batch.request_counts!.completed).toBeGreaterThan(0);
    expect(batch.request_counts!.completed + errors.length).toBe(30);
  });

  it('carries a batch over to its key\'s successor when the key is rotated mid-batch', async () => {
    const secret = await f.key({ rate_limit_rpm: 50000 });
    const original = clientFor(secret);
    const [key] = await f.database.db.select({ id: gatewayKeys.id }).from(gatewayKeys).where(eq(gatewayKeys.secretHash, sha256Hex(secret)));
    const file = await upload(original, Array.from({ length: 24 }, (_, i) => chatLine(`rot-${i}`, `rotating ${i} [sandbox delay_ms=200]`)));
    const created = await original.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await until(async () => ((await original.batches.retrieve(created.id)).request_counts?.completed ?? 0) >= 4, 'some items answered', 30_000, 50);
    // No overlap: the old key is revoked at once.
    const rotated = await f.client.post<{ secret: string }>(`/gateway_keys/${key!.id}/rotate`, { overlap_seconds: 0 });
    expect(rotated.status).toBe(200);
    const successor = clientFor(rotated.body.secret);
    const batch = await ended(successor, created.id);
    expect(batch.request_counts).toEqual({ total: 24, completed: 24, failed: 0 });
    expect((await linesOf(successor, batch.output_file_id)).map((l) => l.custom_id)).toEqual(Array.from({ length: 24 }, (_, i) => `rot-${i}`));
  });

  it('shows operators every batch with its items\' costs, and a project-restricted token only its projects\'', async () => {
    const file = await upload(sdk, [chatLine('op-0', 'x'), chatLine('op-1', 'y')]);
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await ended(sdk, created.id);
    const listed = await f.client.get<{ data: Array<{ id: string; progress: number; cost: number; request_counts: Record<string, number> }> }>('/batches?limit=100');
    expect(listed.status).toBe(200);
    expect(listed.body.data.find((b) => b.id === created.id)).toMatchObject({ progress: 1, run_by: 'gateway', request_counts: { total: 2, completed: 2, failed: 0, not_run: 0 } });
    const items = await f.client.get<{ data: Array<{ custom_id: string; outcome: string; cost: number | null; request_id: string }> }>(`/batches/${created.id}/items`);
    expect(items.body.data.map((i) => [i.custom_id, i.outcome])).toEqual([['op-0', 'succeeded'], ['op-1', 'succeeded']]);
    for (const item of items.body.data) expect(item.cost).toBeGreaterThan(0);
    expect(JSON.stringify(items.body)).not.toContain('choices');
    // A token restricted to another project sees none of it.
    const other = await f.client.post<{ id: string }>('/projects', { name: `elsewhere ${Date.now()}` });
    const narrow = manageClient(f.api.url, (await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'other project', scopes: ['*'], createdByMemberId: f.tenant.memberId, projectIds: [other.body.id] })).token);
    expect((await narrow.get<{ data: Array<{ id: string }> }>('/batches?limit=100')).body.data.map((b) => b.id)).not.toContain(created.id);
    expect((await narrow.get(`/batches/${created.id}`)).status).toBe(404);
    expect((await narrow.get(`/batches/${created.id}/items`)).status).toBe(404);
  });

  it('shows a key only the batches and files within its reach', async () => {
    const file = await upload(sdk, [chatLine('mine', 'x')]);
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const other = clientFor(await f.key({ rate_limit_rpm: 50000 }));
    await expect(other.batches.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.cancel(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.retrieve(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.files.content(file.id)).rejects.toMatchObject({ status: 404 });
    await expect(other.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).rejects.toMatchObject({ status: 404 });
    const seen = [];
    for await (const batch of other.batches.list()) seen.push(batch.id);
    expect(seen).not.toContain(created.id);
    await ended(sdk, created.id);
    const items = await f.database.db.select().from(batchItems).where(eq(batchItems.batchId, created.id));
    expect(items).toHaveLength(1);
  });
});
