import { eq } from 'drizzle-orm';
import OpenAI, { toFile } from 'openai';
import { batches, batchItems } from '../../core/db/schema';
import { workflowIds } from '../../workflows/definitions';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { randomClientAddress, uniquePrefix } from '../helpers/harness';
import { saveHistory } from '../helpers/histories';
import { until } from '../helpers/until';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

const ITEMS = 60;

/**
 * A gateway-run batch whose jobs worker dies mid-batch (SIGKILL, issue 56): another worker
 * carries on from the last recorded item; every item is in the output exactly once; the items
 * the killed worker had in flight were called again, each call billed by the provider, and the
 * batch says how many. Chunks of 5 items and 3 chunks a run: the batch continues as new.
 */
describe('a batch whose worker is killed mid-batch', () => {
  const prefix = uniquePrefix('batchkill');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.001', GW_ALLOW_PRIVATE_NETWORK: 'true', GW_BATCH_CHUNK_ITEMS: '5', GW_BATCH_CHUNKS_PER_RUN: '3', GW_BATCH_ITEM_CONCURRENCY: '4' };
  let f: ChatFixture;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    f = await startChatFixture(env);
    // A route whose batches the gateway runs (OpenAI's own batch API would otherwise take it).
    await f.gatewayRunRoute(await f.connect('openai'), 'gpt-4o-mini', 'gwrun-mini');
  }, 120_000);
  afterAll(async () => {
    for (const w of workers) await w.stop();
    await f?.close();
  });

  it('records every item once and reports the items run again', async () => {
    const tag = prefix.replace(/[^a-z0-9]/g, '');
    const sdk = new OpenAI({ apiKey: await f.key({ rate_limit_rpm: 50000 }), baseURL: `${f.api.url}/v1`, maxRetries: 0, defaultHeaders: { 'x-forwarded-for': randomClientAddress() } });
    const lines = Array.from({ length: ITEMS }, (_, i) => JSON.stringify({
      custom_id: `k-${i}`, method: 'POST', url: '/v1/chat/completions',
      body: { model: 'gwrun-mini', messages: [{ role: 'user', content: `${tag} item ${i} [sandbox delay_ms=150]` }] },
    }));
    const file = await sdk.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'kill.jsonl'), purpose: 'batch' });
    const first = await startWorkerProcess('jobs', prefix, env);
    workers.push(first);
    const created = await sdk.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });

    // Mid-batch, with calls in flight: the worker dies as a machine does.
    await until(async () => ((await sdk.batches.retrieve(created.id)).request_counts?.completed ?? 0) >= 12, 'a third of the items answered', 60_000, 20);
    await first.kill();
    workers.push(await startWorkerProcess('jobs', prefix, env));

    const batch = await until(async () => {
      const read = await sdk.batches.retrieve(created.id);
      return read.status === 'completed' ? read : null;
    }, 'the batch completing on the second worker', 120_000, 200);
    expect(batch.request_counts).toEqual({ total: ITEMS, completed: ITEMS, failed: 0 });
    const output = (await (await sdk.files.content(batch.output_file_id!)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { custom_id: string });
    expect(output.map((l) => l.custom_id)).toEqual(Array.from({ length: ITEMS }, (_, i) => `k-${i}`));

    // The provider saw each item at least once, and again only for the re-runs the batch
    // reports (an item marked started and lost before its call went out is a re-run not billed).
    const calls = f.sandbox.received.filter((r) => r.path.endsWith('/chat/completions') && JSON.stringify(r.body).includes(tag)).length;
    const [row] = await f.database.db.select().from(batches).where(eq(batches.id, created.id));
    expect(calls).toBeGreaterThanOrEqual(ITEMS);
    expect(calls).toBeLessThanOrEqual(ITEMS + row!.rerun);
    expect((batch as unknown as { rerun_count: number }).rerun_count).toBe(row!.rerun);
    const attempts = await f.database.db.select({ attempts: batchItems.attempts }).from(batchItems).where(eq(batchItems.batchId, created.id));
    expect(attempts).toHaveLength(ITEMS);
    expect(attempts.reduce((n, a) => n + a.attempts, 0)).toBe(ITEMS + row!.rerun);

    // 12 chunks at 3 a run: the run continued as new (its first run ended so).
    const continued = await until(async () => {
      const runs: string[] = [];
      for await (const execution of f.api.runtime.temporal.workflow.list({ query: `WorkflowId = "${workflowIds.batchRun(created.id)}"` })) runs.push(execution.status.name);
      return runs.filter((s) => s === 'CONTINUED_AS_NEW').length >= 3 ? runs : null;
    }, 'the batch\'s runs continued as new', 20_000, 200);
    expect(continued).toContain('COMPLETED');
    await saveHistory('batch-run-continued', workflowIds.batchRun(created.id));
  }, 300_000);
});
