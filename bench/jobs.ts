/**
 * `npm run bench:jobs`: what the durable side costs per video job and per webhook delivery
 * (issue 34), on a Temporal dev server started the way `npm start` starts it (SQLite file,
 * precise timers), with the API, the jobs worker and the webhooks worker each in its own
 * process as production runs them, and the sandbox as the video provider.
 *
 * 1. Checks: BENCH_JOBS (20) jobs whose render never finishes, so each runs all 60 status checks
 *    on the schedule scaled by GW_SCHEDULE_SCALE (0.001 here) and ends `failed`. Reported: history
 *    events per job, Temporal actions per job (counted from the history, see `actionsOf`), and
 *    CPU per status check of the jobs worker and of the Temporal server over the phase (the
 *    submit and the end of each job are in it too: an upper bound).
 * 2. A failing delivery: BENCH_FAILING (5) jobs that fail at once, each announcing it to a
 *    receiver that always answers 500, so each delivery makes its 12 attempts. History events
 *    per delivery.
 * 3. Webhooks: BENCH_WEBHOOK_JOBS (200) jobs that succeed, each with a per-request webhook; every
 *    delivery must be received, and the time from the job's completion (`jobs.completed_at`) to
 *    the receipt is reported as p50/p99.
 *
 * The arithmetic from CPU per check to running renders per 2 cores is written into the results.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Client as PgClient } from 'pg';
import { loadConfig } from '../core/config';
import { newKeyring } from '../core/crypto/sealing';
import { applyMigrations } from '../core/db/migrate';
import { statusCheckSchedule } from '../core/jobs/schedule';
import { freePort, waitFor } from '../scripts/lib/ports';
import { resolveTemporalCli } from '../scripts/lib/temporal-cli';
import { DEV_SERVER_LIKE_DYNAMIC_CONFIG, startTemporalCluster } from '../scripts/lib/temporal-cluster';
import { DEV_SERVER_GO_RUNTIME, DEV_SERVER_SQLITE_PRAGMAS, startTemporalDevServer } from '../scripts/lib/temporal-dev-server';
import { SEARCH_ATTRIBUTES } from '../workflows/definitions';
import { createLocalCa } from '../test/helpers/local-ca';
import { startWebhookReceiver } from '../test/helpers/webhook-receiver';
import { taskQueue } from '../workflows/definitions';
import { benchKeys, gatewayEnv, manage, newOrganization, startApi } from './lib/gateway';
import { cpuSeconds, rssMb } from './lib/proc';
import { builtEntry, cleanups, log, node, runBench, waitForPort, waitForWorkerPolling, workDir } from './lib/processes';
import { f0, f1, f2, pct, sh } from './lib/report';
import { services, type Services } from './lib/services';

const SCALE = Number(process.env.BENCH_SCHEDULE_SCALE ?? 0.001);
const CHECK_JOBS = Number(process.env.BENCH_JOBS ?? 20);
const FAILING_DELIVERIES = Number(process.env.BENCH_FAILING ?? 5);
const WEBHOOK_JOBS = Number(process.env.BENCH_WEBHOOK_JOBS ?? 200);
const SUBMIT_CONCURRENCY = 16;
const VIDEO_MODEL = 'openai/sora-2';
/** The real schedule's mean time between two checks of one render (spec 2.1: 1 minute growing to 5). */
const REAL_SCHEDULE = statusCheckSchedule(1);
const REAL_CHECK_GAP_S = REAL_SCHEDULE.reduce((a, b) => a + b, 0) / REAL_SCHEDULE.length / 1000;
/** What a 2-core box must carry at the real schedule (issue 34). */
const TARGET_RENDERS = 50_000;

const EventType = temporal.api.enums.v1.EventType;

type Setup = { apiUrl: string; key: string; orgId: string; client: Client; pg: PgClient; seq: number };

async function submit(s: Setup, prompt: string, webhookUrl?: string): Promise<string> {
  const n = s.seq++;
  const res = await fetch(`${s.apiUrl}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: VIDEO_MODEL, prompt: `${prompt} take ${n}`, duration_seconds: 4, ...(webhookUrl && { webhook: { url: webhookUrl } }) }),
  });
  const text = await res.text();
  if (res.status !== 202) throw new Error(`POST /v1/videos answered ${res.status}: ${text.slice(0, 300)}`);
  return (JSON.parse(text) as { id: string }).id;
}

async function submitMany(s: Setup, count: number, prompt: string, webhookUrl?: string): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(SUBMIT_CONCURRENCY, count) }, async () => {
    while (next < count) {
      next++;
      ids.push(await submit(s, prompt, webhookUrl));
    }
  }));
  return ids;
}

async function waitTerminal(s: Setup, ids: string[], what: string, timeoutMs: number): Promise<void> {
  await waitFor(what, async () => {
    const { rows } = await s.pg.query<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE id = ANY($1) AND status IN ('succeeded','failed','canceled')", [ids]);
    return Number(rows[0]!.n) === ids.length;
  }, timeoutMs);
}

/** Events and actions; and when the run started, and when its first activity was scheduled and started (ms). */
type HistoryCount = { events: number; actions: number; startedAt: number; firstScheduledAt: number; firstStartedAt: number };

const msOf = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) => (t ? Number(t.seconds ?? 0) * 1000 + (t.nanos ?? 0) / 1e6 : NaN);

/**
 * Events in a workflow's history, and the Temporal actions it was billed as Temporal Cloud
 * counts them: the start, each activity attempt (a retried attempt is an action; an activity's
 * attempts show in its started event), each timer, search-attribute upsert, signal and
 * accepted update. Markers and queries are left out.
 */
async function historyOf(client: Client, workflowId: string): Promise<HistoryCount> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  let actions = 0;
  const at = (type: number) => msOf(events.find((e) => e.eventType === type)?.eventTime);
  for (const e of events) {
    switch (e.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
      case EventType.EVENT_TYPE_TIMER_STARTED:
      case EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        actions++;
        break;
      case EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        actions += e.activityTaskStartedEventAttributes?.attempt ?? 1;
        break;
      default:
    }
  }
  return {
    events: events.length, actions,
    startedAt: at(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED),
    firstScheduledAt: at(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
    firstStartedAt: at(EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED),
  };
}

async function histories(client: Client, ids: string[]): Promise<HistoryCount[]> {
  return Promise.all(ids.map((id) => historyOf(client, id)));
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const range = (xs: number[]) => `${f1(mean(xs))} (min ${Math.min(...xs)}, max ${Math.max(...xs)})`;

async function main(): Promise<void> {
  const startedAt = Date.now();
  const load0 = os.loadavg();
  const work = workDir();
  const config = loadConfig();

  // Temporal as `npm start` runs it: the dev server with its SQLite file (WAL) and precise timers;
  // with BENCH_TEMPORAL=cluster, a cluster as operators deploy it (issue 55), on PostgreSQL.
  let temporalPids: number[] = [];
  let temporalNames: string[] = ['Temporal'];
  let temporalKind = 'Temporal dev server as `npm start` starts it (SQLite file in WAL mode, precise timers)';
  if (process.env.BENCH_TEMPORAL === 'cluster') {
    const binDir = sh('bash scripts/setup-temporal-cluster').split('\n').pop()!;
    log('starting a Temporal cluster (PostgreSQL; frontend, matching, worker, two history processes)...');
    const cluster = await startTemporalCluster({
      binDir, postgresUrl: process.env.BENCH_POSTGRES_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', databasePrefix: `bench_temporal_${process.pid}`,
      logDir: path.join(work, 'temporal-cluster'), historyShards: 8, historyProcesses: 2, logLevel: 'warn', namespace: config.TEMPORAL_NAMESPACE, searchAttributes: SEARCH_ATTRIBUTES, dynamicConfig: DEV_SERVER_LIKE_DYNAMIC_CONFIG,
    });
    cleanups.push(() => cluster.stop());
    process.env.TEMPORAL_ADDRESS = cluster.address;
    const running = cluster.processes.filter((p) => p.pid !== null);
    temporalPids = running.map((p) => p.pid!);
    temporalNames = running.map((p) => `Temporal ${p.name}`);
    temporalKind = `Temporal cluster v1.29.1 on PostgreSQL (${cluster.processes.map((p) => p.name).join(', ')}, 8 shards; scripts/lib/temporal-cluster.ts)`;
  } else if (!process.env.TEMPORAL_ADDRESS) {
    log('starting a Temporal dev server as npm start does (SQLite file in WAL mode, precise timers)...');
    const server = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort(), dbFile: path.join(work, 'temporal.sqlite'), namespace: config.TEMPORAL_NAMESPACE, preciseTimers: true, sqlitePragmas: DEV_SERVER_SQLITE_PRAGMAS, goRuntime: DEV_SERVER_GO_RUNTIME });
    cleanups.push(() => server.stop());
    process.env.TEMPORAL_ADDRESS = server.address;
    temporalPids = server.process.pid ? [server.process.pid] : [];
  }
  const svc: Services = await services(work);
  log(`services: ${svc.source}`);
  await applyMigrations(svc.databaseUrl);
  const sealingKeys = newKeyring();
  const ca = createLocalCa();
  const receiver = await startWebhookReceiver(ca);
  cleanups.push(() => receiver.close());
  receiver.on('/fail', () => ({ status: 500 }));

  // A compressed schedule is refused in production (NODE_ENV=production): the processes run
  // compiled as production runs them, with NODE_ENV=development so that the scale is taken.
  const scaled = { GW_SCHEDULE_SCALE: String(SCALE), NODE_EXTRA_CA_CERTS: ca.caFile, NODE_ENV: 'development' };
  const api = await startApi(work, 'api', 'api', svc, sealingKeys, { env: scaled });
  const sandboxPort = await freePort();
  const sandboxLog = path.join(work, 'sandbox.log');
  const sandbox = node(['--import', 'tsx', 'sandbox/main.ts'], { NODE_ENV: 'production', PORT: String(sandboxPort), HOST: '127.0.0.1' }, sandboxLog);
  await waitForPort('the sandbox', sandboxPort, sandbox, sandboxLog);

  const workers = Object.fromEntries(['jobs', 'webhooks'].map((q) => {
    const logFile = path.join(work, `worker-${q}.log`);
    // BENCH_PROFILE=jobs (or webhooks): that worker writes a V8 CPU profile as it stops (into BENCH_PROFILE_DIR, else the work folder).
    const profile = process.env.BENCH_PROFILE === q ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR ?? path.join(work, 'profiles')}`] : [];
    return [q, { child: node([...profile, builtEntry(`workers/${q}`)], { ...gatewayEnv(work, `worker-${q}`, svc, sealingKeys), ...scaled }, logFile), logFile }];
  })) as Record<'jobs' | 'webhooks', { child: ReturnType<typeof node>; logFile: string }>;

  const connection = await Connection.connect({ address: svc.temporalAddress });
  cleanups.push(() => connection.close());
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  for (const [q, w] of Object.entries(workers)) {
    log(`waiting for the ${q} worker to poll...`);
    await waitForWorkerPolling(`the ${q} worker`, w.child, w.logFile, client, config.TEMPORAL_NAMESPACE, taskQueue(q as 'jobs', config.GW_TASK_QUEUE_PREFIX));
  }

  const org = await newOrganization(svc, `bench jobs ${new Date().toISOString()}`);
  await manage(api.apiUrl, org.token, 'POST', '/provider_connections', { kind: 'openai', name: 'sandbox videos', secret: 'sk-sandbox-bench', config: { base_url: `http://127.0.0.1:${sandboxPort}/openai/v1` } });
  const [key] = await benchKeys(api.apiUrl, org.token, 1);
  const pg = new PgClient({ connectionString: svc.databaseUrl });
  await pg.connect();
  cleanups.push(() => pg.end());
  const s: Setup = { apiUrl: api.apiUrl, key: key!, orgId: org.orgId, client, pg, seq: 0 };

  // Warm-up: one job through, so code paths are loaded before CPU is counted.
  log('warming up...');
  await waitTerminal(s, await submitMany(s, 2, 'warm-up [sandbox render_ms=200]'), 'the warm-up jobs', 120_000);

  // ---- 1. checks
  log(`phase 1: ${CHECK_JOBS} jobs of 60 status checks each (schedule scale ${SCALE})...`);
  // Temporal's CPU: every process of it (one for the dev server, five for the cluster).
  const temporalCpu = () => (temporalPids.length > 0 ? temporalPids.reduce((sum, pid) => sum + cpuSeconds(pid), 0) : NaN);
  const cpu0 = { worker: cpuSeconds(workers.jobs.child.pid!), temporal: temporalCpu(), t: Date.now(), load: os.loadavg()[0]! };
  const checkIds = await submitMany(s, CHECK_JOBS, 'a never-ending render [sandbox never_finish]');
  await waitTerminal(s, checkIds, 'the check jobs ending', 600_000);
  const cpu1 = { worker: cpuSeconds(workers.jobs.child.pid!), temporal: temporalCpu(), t: Date.now(), load: os.loadavg()[0]! };
  const { rows: checkRows } = await pg.query<{ checks: string; status: string; code: string | null; type: string | null }>(
    "SELECT sum(status_checks) AS checks, min(status) AS status, min(error->>'type') AS type, min(error->>'code') AS code FROM jobs WHERE id = ANY($1)", [checkIds]);
  const checks = Number(checkRows[0]!.checks);
  const checkHistories = await histories(client, checkIds);
  const workerMsPerCheck = ((cpu1.worker - cpu0.worker) * 1000) / checks;
  const temporalMsPerCheck = ((cpu1.temporal - cpu0.temporal) * 1000) / checks;
  const msPerCheck = workerMsPerCheck + temporalMsPerCheck;
  log(`  ${checks} checks; ${f2(workerMsPerCheck)} ms worker + ${f2(temporalMsPerCheck)} ms Temporal CPU per check; events per job ${range(checkHistories.map((h) => h.events))}`);

  // ---- 2. a failing delivery
  log(`phase 2: ${FAILING_DELIVERIES} deliveries failing all 12 attempts...`);
  const failIds = await submitMany(s, FAILING_DELIVERIES, 'a failing render [sandbox video_fail]', receiver.url('/fail'));
  await waitTerminal(s, failIds, 'the failing jobs', 120_000);
  await waitFor('the failing deliveries giving up', async () => {
    const { rows } = await pg.query<{ n: string }>("SELECT count(*) AS n FROM webhook_deliveries WHERE job_id = ANY($1) AND status = 'failed'", [failIds]);
    return Number(rows[0]!.n) === failIds.length;
  }, 600_000);
  const { rows: failRows } = await pg.query<{ id: string; attempts: number }>('SELECT id, attempts FROM webhook_deliveries WHERE job_id = ANY($1)', [failIds]);
  const failHistories = await histories(client, failRows.map((r) => r.id));
  log(`  attempts ${failRows.map((r) => r.attempts).join(', ')}; events per delivery ${range(failHistories.map((h) => h.events))}`);

  // ---- 3. webhooks
  log(`phase 3: ${WEBHOOK_JOBS} jobs with a webhook each...`);
  const load3 = os.loadavg()[0]!;
  // CPU of each process over the phase: where a delivery waits when the box is busy.
  const pids = { ...Object.fromEntries(temporalPids.map((pid, i) => [temporalNames[i] ?? `Temporal ${i + 1}`, pid])), API: api.pid, 'jobs worker': workers.jobs.child.pid!, 'webhooks worker': workers.webhooks.child.pid!, sandbox: sandbox.pid! };
  const cpuNow = () => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? cpuSeconds(pid) : NaN]));
  const cpu3 = { at: Date.now(), cpu: cpuNow() };
  const okIds = await submitMany(s, WEBHOOK_JOBS, 'a quick render [sandbox render_ms=300]', receiver.url('/ok'));
  await waitTerminal(s, okIds, 'the webhook jobs', 600_000);
  const received = await waitFor('every delivery received', async () => receiver.received('/ok').length >= okIds.length, 300_000).then(() => true, () => false);
  const cpuEnd = cpuNow();
  const phaseSeconds = (Date.now() - cpu3.at) / 1000;
  const cpuLine = `over ${f1(phaseSeconds)} s: ${Object.keys(pids).map((k) => `${k} ${f1(cpuEnd[k]! - cpu3.cpu[k]!)} s`).join(', ')} of CPU`;
  log(`  ${cpuLine}`);
  const { rows: done } = await pg.query<{ id: string; completed: Date; status: string }>('SELECT id, completed_at AS completed, status FROM jobs WHERE id = ANY($1)', [okIds]);
  const receipts = new Map<string, number>();
  for (const r of receiver.received('/ok')) {
    const body = JSON.parse(r.body) as { data?: { id?: string } };
    const id = body.data?.id;
    if (id && !receipts.has(id)) receipts.set(id, r.receivedAt);
  }
  const lags = done.filter((d) => receipts.has(d.id)).map((d) => receipts.get(d.id)! - d.completed.getTime());
  const okDeliveries = await pg.query<{ id: string; jobId: string }>('SELECT id, job_id AS "jobId" FROM webhook_deliveries WHERE job_id = ANY($1)', [okIds]);
  const allOkHistories = await histories(client, okDeliveries.rows.map((r) => r.id));
  const okHistories = allOkHistories.slice(0, 20);
  // Where a delivery's time goes: the job's completion to its workflow's start, to the
  // `deliver` activity's schedule, to its start (a worker took it), to the receipt.
  const completedOf = new Map(done.map((d) => [d.id, d.completed.getTime()]));
  const legs = { start: [] as number[], schedule: [] as number[], pickUp: [] as number[], send: [] as number[] };
  okDeliveries.rows.forEach((d, i) => {
    const h = allOkHistories[i]!;
    const completed = completedOf.get(d.jobId);
    const receipt = receipts.get(d.jobId);
    if (completed === undefined || receipt === undefined) return;
    legs.start.push(h.startedAt - completed);
    legs.schedule.push(h.firstScheduledAt - h.startedAt);
    legs.pickUp.push(h.firstStartedAt - h.firstScheduledAt);
    legs.send.push(receipt - h.firstStartedAt);
  });
  const leg = (xs: number[]) => `p50 ${f0(pct(xs, 50))} ms, p99 ${f0(pct(xs, 99))} ms`;
  const legLine = `completion to workflow start ${leg(legs.start)}; to \`deliver\` scheduled ${leg(legs.schedule)}; to its start ${leg(legs.pickUp)}; to receipt ${leg(legs.send)}`;
  log(`  ${legLine}`);
  const jobHistories = await histories(client, okIds.slice(0, 20));
  log(`  received ${receipts.size} of ${okIds.length}; completion to receipt p50 ${f0(pct(lags, 50))} ms, p99 ${f0(pct(lags, 99))} ms`);

  // ---- report
  const rendersPer2Cores = (2 * 1000 * REAL_CHECK_GAP_S) / msPerCheck;
  const maxEvents = Math.max(...checkHistories.map((h) => h.events));
  const maxFailEvents = Math.max(...failHistories.map((h) => h.events));
  const p99 = pct(lags, 99);
  const bars = [
    `- a 60-check job writes at most 60 history events: ${maxEvents} at most (${maxEvents <= 60 ? 'met' : 'NOT met'})`,
    `- a 12-attempt failing delivery writes at most 16: ${maxFailEvents} at most (${maxFailEvents <= 16 ? 'met' : 'NOT met'})`,
    `- CPU per status check, worker and Temporal together, at most 5 ms: ${f2(msPerCheck)} ms (${msPerCheck <= 5 ? 'met' : 'NOT met'})`,
    `- ${WEBHOOK_JOBS} jobs with a webhook each, every delivery received, completion to receipt p99 under 3 s: ${receipts.size} of ${okIds.length} received, p99 ${f0(p99)} ms (${received && receipts.size === okIds.length && p99 < 3000 ? 'met' : 'NOT met'})`,
  ];
  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  const text = [
    `# Durable side: jobs, checks and deliveries, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `\`npm run bench:jobs\` (bench/jobs.ts), ${minutes} minutes. ${temporalKind}${temporalPids.length > 0 ? '' : '; here the one TEMPORAL_ADDRESS names, so its CPU is not measured'}; ` +
      `API, jobs worker and webhooks worker each in its own process, compiled as production runs them; the sandbox as the video provider; schedule scale ${SCALE}.`,
    '',
    '## Bars (issue 34)',
    '',
    ...bars,
    '',
    '## Status checks',
    '',
    `- ${CHECK_JOBS} jobs whose render never finishes: ${checks} status checks (${f1(checks / CHECK_JOBS)} per job), jobs ended ${checkRows[0]!.status} (${checkRows[0]!.type})`,
    `- history events per job: ${range(checkHistories.map((h) => h.events))}; Temporal actions per job: ${range(checkHistories.map((h) => h.actions))}`,
    `- CPU per check: jobs worker ${f2(workerMsPerCheck)} ms, Temporal server ${f2(temporalMsPerCheck)} ms, together ${f2(msPerCheck)} ms (over ${f1((cpu1.t - cpu0.t) / 1000)} s; load average ${f2(cpu0.load)} before, ${f2(cpu1.load)} after). The submit, the record and the end of each job are counted in it too.`,
    `- jobs worker RSS after the phase: ${f0(rssMb(workers.jobs.child.pid!))} MB`,
    '',
    '## Running renders per 2 cores at the real schedule',
    '',
    `The real schedule (1 minute growing by half to 5) checks a render every ${f1(REAL_CHECK_GAP_S)} s on average over its 60 checks. ` +
      `A render costs ${f2(msPerCheck)} ms of CPU per check, so ${f2(msPerCheck / REAL_CHECK_GAP_S)} ms of CPU per second of running; ` +
      `2 cores (2,000 ms of CPU a second) carry 2000 / ${f2(msPerCheck / REAL_CHECK_GAP_S)} = ${f0(rendersPer2Cores)} running renders (target ${TARGET_RENDERS}).`,
    '',
    '## Deliveries',
    '',
    `- failing deliveries (receiver answers 500): attempts ${failRows.map((r) => r.attempts).join(', ')}; history events per delivery ${range(failHistories.map((h) => h.events))}; actions ${range(failHistories.map((h) => h.actions))}`,
    `- succeeded deliveries (first 20): history events ${range(okHistories.map((h) => h.events))}; succeeded jobs (first 20): history events ${range(jobHistories.map((h) => h.events))}`,
    `- ${WEBHOOK_JOBS} jobs with a webhook: ${receipts.size} deliveries received; completion to receipt p50 ${f0(pct(lags, 50))} ms, p99 ${f0(p99)} ms, max ${f0(Math.max(...lags))} ms (load average ${f2(load3)} at the start)`,
    `- where it goes: ${legLine}`,
    `- CPU in the phase, ${cpuLine}`,
    '',
    '## Machine',
    '',
    `- ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${f0(os.totalmem() / 2 ** 30)} GiB; Node ${process.version}; ${sh(`${resolveTemporalCli()} --version`) || 'temporal CLI'}`,
    `- load average at the start: ${load0.map(f2).join(', ')}; at the end: ${os.loadavg().map(f2).join(', ')}`,
    `- services: ${svc.source}`,
    '',
  ].join('\n');
  console.log(`\n${text}`);
  const file = path.join(__dirname, 'results', `${new Date().toISOString().slice(0, 10)}-jobs${process.env.BENCH_TEMPORAL === 'cluster' ? '-cluster' : ''}.md`);
  fs.writeFileSync(file, text);
  log(`wrote ${path.relative(path.join(__dirname, '..'), file)}`);
}

runBench(main);
