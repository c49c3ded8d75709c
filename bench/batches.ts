/**
 * `npm run bench:batches`: one gateway-run batch of BENCH_BATCH_ITEMS (10,000) chat requests
 * through the sandbox (issue 56), on a Temporal dev server started as `npm start` starts it, with
 * the API and the jobs worker each in its own process, compiled as production runs them.
 *
 * Reported: wall time from create to `completed`, items a second, history events over every run
 * of the batch's workflow (it continues as new), the jobs worker's CPU per item and its RSS
 * sampled as the batch grows (it should stay flat: items are streamed and recorded, never held),
 * and the Temporal server's CPU.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../core/config';
import { newKeyring } from '../core/crypto/sealing';
import { applyMigrations } from '../core/db/migrate';
import { freePort, waitFor } from '../scripts/lib/ports';
import { resolveTemporalCli } from '../scripts/lib/temporal-cli';
import { DEV_SERVER_GO_RUNTIME, DEV_SERVER_SQLITE_PRAGMAS, startTemporalDevServer } from '../scripts/lib/temporal-dev-server';
import { taskQueue } from '../workflows/definitions';
import { benchKeys, gatewayEnv, manage, newOrganization, startApi } from './lib/gateway';
import { cpuSeconds, rssMb } from './lib/proc';
import { builtEntry, cleanups, log, node, runBench, waitForPort, waitForWorkerPolling, workDir } from './lib/processes';
import { f0, f1, f2, sh } from './lib/report';
import { services, type Services } from './lib/services';

const ITEMS = Number(process.env.BENCH_BATCH_ITEMS ?? 10_000);
const MODEL = 'gpt-4o-mini';
/** The route the items name, whose batches the gateway runs (`batch_mode: gateway`). */
const ROUTE = 'bench-gateway-run';

type Sample = { at: number; completed: number; workerCpu: number; workerRss: number; temporalCpu: number };

async function main(): Promise<void> {
  const startedAt = Date.now();
  const load0 = os.loadavg();
  const work = workDir();
  const config = loadConfig();

  log('starting a Temporal dev server as npm start does (SQLite file in WAL mode, precise timers)...');
  const server = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort(), dbFile: path.join(work, 'temporal.sqlite'), namespace: config.TEMPORAL_NAMESPACE, preciseTimers: true, sqlitePragmas: DEV_SERVER_SQLITE_PRAGMAS, goRuntime: DEV_SERVER_GO_RUNTIME });
  cleanups.push(() => server.stop());
  process.env.TEMPORAL_ADDRESS = server.address;
  const temporalPid = server.process.pid!;
  const svc: Services = await services(work);
  log(`services: ${svc.source}`);
  await applyMigrations(svc.databaseUrl);
  const sealingKeys = newKeyring();

  const api = await startApi(work, 'api', 'api', svc, sealingKeys);
  const sandboxPort = await freePort();
  const sandboxLog = path.join(work, 'sandbox.log');
  const sandbox = node(['--import', 'tsx', 'sandbox/main.ts'], { NODE_ENV: 'production', PORT: String(sandboxPort), HOST: '127.0.0.1' }, sandboxLog);
  await waitForPort('the sandbox', sandboxPort, sandbox, sandboxLog);
  const workerLog = path.join(work, 'worker-jobs.log');
  // The worker reads the files the API stored: one data directory, as on one machine (docs/operations.md).
  const worker = node([builtEntry('workers/jobs')], { ...gatewayEnv(work, 'worker-jobs', svc, sealingKeys), GW_DATA_DIR: path.join(work, 'data-api') }, workerLog);

  const connection = await Connection.connect({ address: svc.temporalAddress });
  cleanups.push(() => connection.close());
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  log('waiting for the jobs worker to poll...');
  await waitForWorkerPolling('the jobs worker', worker, workerLog, client, config.TEMPORAL_NAMESPACE, taskQueue('jobs', config.GW_TASK_QUEUE_PREFIX));

  const org = await newOrganization(svc, `bench batches ${new Date().toISOString()}`);
  const sandboxConnection = await manage(api.apiUrl, org.token, 'POST', '/provider_connections', { kind: 'openai', name: 'sandbox', secret: 'sk-sandbox-bench', config: { base_url: `http://127.0.0.1:${sandboxPort}/openai/v1` } });
  // The gateway runs these items itself: OpenAI's own batch API would otherwise take the batch.
  await manage(api.apiUrl, org.token, 'POST', '/routes', { slug: ROUTE, targets: [{ connection_id: sandboxConnection.id, model: MODEL }], batch_mode: 'gateway' });
  const [key] = await benchKeys(api.apiUrl, org.token, 1);
  const call = async (method: string, p: string, body?: string | FormData, type?: string) => {
    const res = await fetch(`${api.apiUrl}${p}`, { method, headers: { authorization: `Bearer ${key}`, ...(type && { 'content-type': type }) }, body });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${p} answered ${res.status}: ${text.slice(0, 300)}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const upload = async (lines: number, tag: string) => {
    const jsonl = Array.from({ length: lines }, (_, i) => JSON.stringify({ custom_id: `${tag}-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: ROUTE, messages: [{ role: 'user', content: `${tag} question ${i}` }] } })).join('\n');
    const form = new FormData();
    form.set('purpose', 'batch');
    form.set('file', new Blob([jsonl]), `${tag}.jsonl`);
    return { file: await call('POST', '/v1/files', form), bytes: Buffer.byteLength(jsonl) };
  };
  const runBatch = async (fileId: string) => call('POST', '/v1/batches', JSON.stringify({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' }), 'application/json');
  const read = async (id: string) => call('GET', `/v1/batches/${id}`);

  // Warm-up: a small batch through, so the worker's in-process gateway is started and its code loaded.
  log('warming up...');
  const warm = await runBatch(String((await upload(50, 'warm')).file.id));
  await waitFor('the warm-up batch', async () => (await read(String(warm.id))).status === 'completed', 120_000);

  log(`uploading ${ITEMS} items...`);
  const { file, bytes } = await upload(ITEMS, 'bench');
  const samples: Sample[] = [];
  const sample = (completed: number): Sample => ({ at: Date.now(), completed, workerCpu: cpuSeconds(worker.pid!), workerRss: rssMb(worker.pid!), temporalCpu: cpuSeconds(temporalPid) });
  const first = sample(0);
  samples.push(first);
  const batch = await runBatch(String(file.id));
  const id = String(batch.id);
  log(`batch ${id} started; sampling every 2 s...`);
  let ended: Record<string, unknown> = batch;
  const deadline = Date.now() + 60 * 60_000;
  for (;;) {
    await new Promise((r) => setTimeout(r, 2_000));
    ended = await read(id);
    const progress = ended.request_counts as { completed: number; failed: number };
    samples.push(sample(progress.completed + progress.failed));
    if (samples.length % 10 === 0) log(`  ${progress.completed + progress.failed} of ${ITEMS}, worker RSS ${f0(samples.at(-1)!.workerRss)} MB`);
    if (['completed', 'failed', 'expired', 'cancelled'].includes(String(ended.status))) break;
    if (Date.now() > deadline) throw new Error(`the batch did not end within an hour: ${JSON.stringify(ended)}`);
  }
  const last = samples.at(-1)!;
  const wallS = (last.at - first.at) / 1000;
  const counts = ended.request_counts as { total: number; completed: number; failed: number };

  // Every run of the workflow: it continued as new every GW_BATCH_CHUNKS_PER_RUN chunks.
  const runs: { runId: string; events: number }[] = [];
  for await (const execution of client.workflow.list({ query: `WorkflowId = "${id}"` })) {
    const history = await client.workflow.getHandle(id, execution.runId).fetchHistory();
    runs.push({ runId: execution.runId, events: history.events?.length ?? 0 });
  }
  const events = runs.reduce((n, r) => n + r.events, 0);
  const rssAt = (fraction: number) => samples.find((s) => s.completed >= fraction * ITEMS)?.workerRss ?? NaN;
  const workerCpuS = last.workerCpu - first.workerCpu;
  const temporalCpuS = last.temporalCpu - first.temporalCpu;

  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  const text = [
    `# A gateway-run batch of ${ITEMS} items, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `\`npm run bench:batches\` (bench/batches.ts), ${minutes} minutes. Temporal dev server as \`npm start\` starts it; the API and one jobs worker each in its own process, compiled as production runs them (default batch settings: ${config.GW_BATCH_CHUNK_ITEMS} items a chunk, ${config.GW_BATCH_ITEM_CONCURRENCY} in flight, Continue-As-New every ${config.GW_BATCH_CHUNKS_PER_RUN} chunks); every item a \`${MODEL}\` chat completion, named by a \`batch_mode: gateway\` route, through the gateway's own request path, answered by the sandbox.`,
    '',
    `- input: ${ITEMS} lines, ${f1(bytes / 1e6)} MB; ended \`${String(ended.status)}\` with ${counts.completed} completed, ${counts.failed} failed`,
    `- wall time, create to \`completed\`: ${f1(wallS)} s; ${f1(ITEMS / wallS)} items a second`,
    `- history: ${runs.length} runs (Continue-As-New), ${events} events in all, at most ${Math.max(...runs.map((r) => r.events))} in one run`,
    `- jobs worker CPU: ${f1(workerCpuS)} s, ${f2((workerCpuS * 1000) / ITEMS)} ms an item (the item's whole request path runs in the worker); Temporal server CPU: ${f1(temporalCpuS)} s, ${f2((temporalCpuS * 1000) / ITEMS)} ms an item`,
    `- jobs worker RSS: ${f0(first.workerRss)} MB before, ${f0(rssAt(0.1))} MB at 10%, ${f0(rssAt(0.5))} MB at half, ${f0(rssAt(0.9))} MB at 90%, ${f0(last.workerRss)} MB at the end (max ${f0(Math.max(...samples.map((s) => s.workerRss)))} MB)`,
    '',
    '## Machine',
    '',
    `- ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${f0(os.totalmem() / 2 ** 30)} GiB; Node ${process.version}; ${sh(`${resolveTemporalCli()} --version`) || 'temporal CLI'}`,
    `- load average at the start: ${load0.map(f2).join(', ')}; at the end: ${os.loadavg().map(f2).join(', ')} (above 2 means other work shared the two cores)`,
    `- services: ${svc.source}`,
    '',
  ].join('\n');
  console.log(`\n${text}`);
  const out = path.join(__dirname, 'results', `${new Date().toISOString().slice(0, 10)}-batches.md`);
  fs.writeFileSync(out, text);
  log(`wrote ${path.relative(path.join(__dirname, '..'), out)}`);
}

runBench(main);
