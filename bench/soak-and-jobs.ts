/**
 * `npm run bench:soak`: the two measurements of issue 11 that bench/side-by-side.ts lacks.
 *
 * 1. Soak: the `gateway` subject of side-by-side (same API process, same organization set-up:
 *    keys with the 50 000 rpm tier and a credit limit, request log, prompt logging off) under
 *    wrk at c=32, non-streaming chat against bench/mock-upstream.ts, for BENCH_SOAK_MINUTES (10);
 *    the API's RSS sampled every 30 s; growth as a least-squares slope over the samples after
 *    the first minute. Target: at most 1 MB a minute over 10 minutes.
 * 2. Video jobs: `POST /v1/videos` (spec 4.2) on the same API, the jobs worker
 *    (workers/jobs.ts) beside it and the sandbox (sandbox/main.ts) as the video provider;
 *    p50 / p99 at c=1 and c=16 for BENCH_VIDEO_SECONDS (20) each, every request with its own
 *    prompt and Idempotency-Key, and the workflows the Temporal server started per second.
 *
 * Services as side-by-side finds or starts them (bench/lib/services.ts). See bench/README.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client, Connection } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { loadConfig } from '../core/config';
import { newKeyring } from '../core/crypto/sealing';
import { applyMigrations } from '../core/db/migrate';
import { freePort, waitFor } from '../scripts/lib/ports';
import { taskQueue } from '../workflows/definitions';
import { benchKeys, chatBody, gatewayEnv, manage, newOrganization, startGatewaySubject, startMock, type StartedApi } from './lib/gateway';
import { findLoadTool, type LoadResult, type LoadTool } from './lib/load';
import { cpuSeconds, rssMb } from './lib/proc';
import { builtEntry, cleanups, log, node, runBench, waitForPort, waitForWorkerPolling, workDir } from './lib/processes';
import { f0, f1, f2, machineLines, pct } from './lib/report';
import { services, type Services } from './lib/services';

const SOAK_MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 10);
const SOAK_CONNECTIONS = 32;
const SAMPLE_EVERY_S = 30;
/** Samples before this are the warm-up: not in the slope. */
const WARM_UP_S = 60;
const TARGET_MB_PER_MIN = 1;
const VIDEO_SECONDS = Number(process.env.BENCH_VIDEO_SECONDS ?? 20);
const VIDEO_CONCURRENCY = [1, 16] as const;
/** How long after the last submit the jobs are counted by status (the worker picks them up). */
const VIDEO_SETTLE_S = 15;
const VIDEO_MODEL = 'openai/sora-2';

// ---------------------------------------------------------------- soak

type Sample = { t: number; rssMb: number; cpuS: number; load1: number };
type Soak = { load: LoadResult; samples: Sample[]; slope: number; slopeError: number; rssStart: number; rssEnd: number; cpuUsPerReq: number };

/**
 * Least-squares slope of y over x, and its standard error (the garbage collector moves RSS by
 * tens of MB between samples, so a slope means little without it).
 */
function slope(points: Array<[number, number]>): { slope: number; error: number } {
  if (points.length < 2) return { slope: NaN, error: NaN };
  const mx = points.reduce((a, [x]) => a + x, 0) / points.length;
  const my = points.reduce((a, [, y]) => a + y, 0) / points.length;
  const sxy = points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const sxx = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  if (sxx === 0) return { slope: NaN, error: NaN };
  const b = sxy / sxx;
  const residuals = points.reduce((a, [x, y]) => a + (y - my - b * (x - mx)) ** 2, 0);
  return { slope: b, error: points.length > 2 ? Math.sqrt(residuals / (points.length - 2) / sxx) : NaN };
}

async function soak(tool: LoadTool, api: StartedApi & { keys: string[] }, work: string): Promise<Soak> {
  const seconds = Math.round(SOAK_MINUTES * 60);
  const samples: Sample[] = [];
  const started = Date.now();
  const sample = () => {
    const s = { t: (Date.now() - started) / 1000, rssMb: rssMb(api.pid), cpuS: cpuSeconds(api.pid), load1: os.loadavg()[0]! };
    samples.push(s);
    log(`  t=${f0(s.t).padStart(4)} s  RSS ${f1(s.rssMb)} MB  load ${f2(s.load1)}`);
  };
  sample();
  const running = tool.run({
    url: `${api.apiUrl}/v1/chat/completions`, headers: { 'content-type': 'application/json' }, bearers: api.keys,
    body: chatBody('openai/gpt-4o-mini'), connections: SOAK_CONNECTIONS, seconds,
  }, work);
  let done = false;
  const finished = running.finally(() => (done = true));
  for (let k = 1; k * SAMPLE_EVERY_S <= seconds; k++) {
    const due = started + k * SAMPLE_EVERY_S * 1000;
    await Promise.race([new Promise((r) => setTimeout(r, Math.max(0, due - Date.now()))), finished.catch(() => undefined)]);
    if (done && k * SAMPLE_EVERY_S < seconds) break; // wrk ended early: its error follows
    sample();
  }
  const load = await running;
  if (samples.at(-1)!.t < seconds - 1) sample();
  const after = samples.filter((s) => s.t >= WARM_UP_S).map((s): [number, number] => [s.t / 60, s.rssMb]);
  const first = samples[0]!;
  const last = samples.at(-1)!;
  const fit = slope(after);
  return { load, samples, slope: fit.slope, slopeError: fit.error, rssStart: first.rssMb, rssEnd: last.rssMb, cpuUsPerReq: ((last.cpuS - first.cpuS) / Math.max(1, load.requests)) * 1e6 };
}

// ---------------------------------------------------------------- video jobs

type VideoRun = { loadBefore: number; loadAfter: number; concurrency: number; seconds: number; requests: number; accepted: number; rps: number; p50Ms: number; p99Ms: number; errors: number; errorSample: string; startedFrom: number; startedTo: number; workflows: number; startsPerS: number; peakStartsPerS: number };

type VideoSetup = { apiUrl: string; key: string; orgId: string; temporal: Client; seq: number };

async function submit(v: VideoSetup): Promise<{ status: number; text: string }> {
  const n = v.seq++;
  const res = await fetch(`${v.apiUrl}/v1/videos`, {
    method: 'POST',
    headers: { authorization: `Bearer ${v.key}`, 'content-type': 'application/json', 'idempotency-key': `bench-${process.pid}-${n}` },
    body: JSON.stringify({ model: VIDEO_MODEL, prompt: `a fox crossing a snowy field, take ${n}`, duration_seconds: 4 }),
  });
  return { status: res.status, text: await res.text() };
}

/** Start times of this organization's video workflows, from Temporal's visibility. */
async function workflowStarts(v: VideoSetup): Promise<number[]> {
  const starts: number[] = [];
  for await (const wf of v.temporal.workflow.list({ query: `WorkflowType = 'videoJob' AND GwOrgId = '${v.orgId}'` })) starts.push(wf.startTime.getTime());
  return starts;
}

/** Workflows started in [from, to]: their mean rate and the busiest whole second. */
function startRate(starts: number[], from: number, to: number): { count: number; perS: number; peak: number } {
  const inside = starts.filter((t) => t >= from && t <= to);
  const buckets = new Map<number, number>();
  for (const t of inside) buckets.set(Math.floor(t / 1000), (buckets.get(Math.floor(t / 1000)) ?? 0) + 1);
  return { count: inside.length, perS: inside.length / Math.max(0.001, (to - from) / 1000), peak: Math.max(0, ...buckets.values()) };
}

async function videoRun(v: VideoSetup, concurrency: number): Promise<VideoRun> {
  const latencies: number[] = [];
  const errors = new Map<string, number>();
  let accepted = 0;
  const loadBefore = os.loadavg()[0]!;
  const from = Date.now();
  const end = from + VIDEO_SECONDS * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (Date.now() < end) {
      const t0 = performance.now();
      let outcome: string | null = null;
      try {
        const r = await submit(v);
        if (r.status === 202) accepted++;
        else outcome = `${r.status} ${r.text.replace(/\s+/g, ' ').slice(0, 140)}`;
      } catch (err) {
        outcome = (err as Error).message;
      }
      latencies.push(performance.now() - t0);
      if (outcome) errors.set(outcome, (errors.get(outcome) ?? 0) + 1);
    }
  }));
  const to = Date.now();
  const loadAfter = os.loadavg()[0]!;
  await new Promise((r) => setTimeout(r, 2000)); // visibility catches up
  const rate = startRate(await workflowStarts(v), from, to);
  const seconds = (to - from) / 1000;
  return {
    loadBefore, loadAfter, concurrency, seconds, requests: latencies.length, accepted, rps: latencies.length / seconds, p50Ms: pct(latencies, 50), p99Ms: pct(latencies, 99),
    errors: [...errors.values()].reduce((a, n) => a + n, 0), errorSample: [...errors].map(([e, n]) => `${n}x ${e}`).join('; ').slice(0, 400),
    startedFrom: from, startedTo: to, workflows: rate.count, startsPerS: rate.perS, peakStartsPerS: rate.peak,
  };
}

/**
 * Temporal alone: workflows started straight from a client at c=16 on a task queue nobody polls
 * (they stay open until the in-memory server stops), for the server's own ceiling. Only on the
 * bench's own dev server, which is gone at the end.
 */
async function temporalOnly(client: Client, concurrency: number): Promise<{ started: number; perS: number; p50Ms: number; p99Ms: number; errors: number }> {
  const latencies: number[] = [];
  let errors = 0;
  let n = 0;
  const from = Date.now();
  const end = from + VIDEO_SECONDS * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (Date.now() < end) {
      const t0 = performance.now();
      try {
        await client.workflow.start('benchNothing', { taskQueue: `bench-unpolled-${process.pid}`, workflowId: `bench-start-${process.pid}-${n++}` });
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t0);
    }
  }));
  const seconds = (Date.now() - from) / 1000;
  return { started: latencies.length - errors, perS: (latencies.length - errors) / seconds, p50Ms: pct(latencies, 50), p99Ms: pct(latencies, 99), errors };
}

async function jobsByStatus(svc: Services, orgId: string): Promise<Record<string, number>> {
  const pg = new PgClient({ connectionString: svc.databaseUrl });
  await pg.connect();
  try {
    const { rows } = await pg.query<{ status: string; n: string }>('SELECT status, count(*) AS n FROM jobs WHERE org_id = $1 GROUP BY status ORDER BY status', [orgId]);
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  } finally {
    await pg.end();
  }
}

type Videos = { runs: VideoRun[]; temporalOnly: Awaited<ReturnType<typeof temporalOnly>> | null; statuses: Record<string, number>; submitted: number; workerRssMb: number; notes: string[] };

async function videos(work: string, svc: Services, sealingKeys: string, api: StartedApi): Promise<Videos> {
  const notes: string[] = [];
  const config = loadConfig();
  // The video provider: the sandbox, in its own process as `npm run sandbox` runs it.
  const sandboxPort = await freePort();
  const sandboxLog = path.join(work, 'sandbox.log');
  const sandbox = node(['--import', 'tsx', 'sandbox/main.ts'], { NODE_ENV: 'production', PORT: String(sandboxPort), HOST: '127.0.0.1' }, sandboxLog);
  await waitForPort('the sandbox', sandboxPort, sandbox, sandboxLog);

  // Its own organization, so the chat organization's `openai` connection to the mock is not a candidate.
  const org = await newOrganization(svc, `bench videos ${new Date().toISOString()}`);
  await manage(api.apiUrl, org.token, 'POST', '/provider_connections', { kind: 'openai', name: 'sandbox videos', secret: 'sk-sandbox-bench', config: { base_url: `http://127.0.0.1:${sandboxPort}/openai/v1` } });
  const [key] = await benchKeys(api.apiUrl, org.token, 1);

  // The jobs worker as `npm run worker:jobs` runs it (compiled, the prebuilt workflow bundle), with the API's settings (private network allowed: the sandbox is on loopback).
  const workerLog = path.join(work, 'worker-jobs.log');
  const worker = node([builtEntry('workers/jobs')], gatewayEnv(work, 'worker', svc, sealingKeys), workerLog);
  const connection = await Connection.connect({ address: svc.temporalAddress });
  cleanups.push(() => connection.close());
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
  log('waiting for the jobs worker to poll...');
  await waitForWorkerPolling('the jobs worker', worker, workerLog, client, config.TEMPORAL_NAMESPACE, taskQueue('jobs', config.GW_TASK_QUEUE_PREFIX));

  const v: VideoSetup = { apiUrl: api.apiUrl, key: key!, orgId: org.orgId, temporal: client, seq: 0 };
  // Warm-up: a few jobs, each followed until the worker has submitted it to the sandbox.
  log('warming the video path...');
  for (let i = 0; i < 4; i++) {
    const r = await submit(v);
    if (r.status !== 202) throw new Error(`POST /v1/videos answered ${r.status}: ${r.text.slice(0, 300)}`);
  }
  const warmed = await waitFor('the warm-up jobs running', async () => {
    const s = await jobsByStatus(svc, org.orgId);
    return (s.queued ?? 0) === 0;
  }, 60_000).then(() => true, () => false);
  if (!warmed) notes.push(`The warm-up jobs were still queued after 60 s: ${JSON.stringify(await jobsByStatus(svc, org.orgId))}`);

  const runs: VideoRun[] = [];
  for (const c of VIDEO_CONCURRENCY) {
    const r = await videoRun(v, c);
    runs.push(r);
    log(`POST /v1/videos c=${c}: ${f1(r.rps)} req/s, p50 ${f1(r.p50Ms)} ms, p99 ${f1(r.p99Ms)} ms, errors ${r.errors}; workflows started ${r.workflows} (${f1(r.startsPerS)}/s, busiest second ${r.peakStartsPerS})${r.errorSample ? `; ${r.errorSample}` : ''}`);
  }
  await new Promise((r) => setTimeout(r, VIDEO_SETTLE_S * 1000));
  const statuses = await jobsByStatus(svc, org.orgId);
  const workerRss = rssMb(worker.pid!);

  let only: Videos['temporalOnly'] = null;
  if (svc.ownTemporal) {
    only = await temporalOnly(client, 16);
    log(`Temporal alone, c=16: ${f1(only.perS)} starts/s, p50 ${f1(only.p50Ms)} ms, p99 ${f1(only.p99Ms)} ms, errors ${only.errors}`);
  } else notes.push('Temporal alone was not measured: the Temporal server is not the bench\'s own (it would keep the started workflows).');
  return { runs, temporalOnly: only, statuses, submitted: v.seq, workerRssMb: workerRss, notes };
}

// ---------------------------------------------------------------- report

function report(s: Soak, vid: Videos): { text: string; targets: string[] } {
  const l = s.load;
  const rows: Array<[string, string]> = [
    [`soak: req/s, c=${SOAK_CONNECTIONS}, ${f1(l.seconds / 60)} min`, f0(l.rps)],
    ['soak: p50 / p99 ms', `${f2(l.p50Ms)} / ${f2(l.p99Ms)}`],
    ['soak: requests / errors', `${l.requests} / ${l.errors}`],
    ['soak: API CPU µs/req', f0(s.cpuUsPerReq)],
    ['soak: API RSS MB at start / after 1 min / at end', `${f1(s.rssStart)} / ${f1(s.samples.find((x) => x.t >= WARM_UP_S)?.rssMb ?? NaN)} / ${f1(s.rssEnd)}`],
    [`soak: RSS growth MB/min (least squares, ${s.samples.filter((x) => x.t >= WARM_UP_S).length} samples after minute 1; ± standard error)`, `${f2(s.slope)} ± ${f2(s.slopeError)}`],
    ['soak: API RSS MB after minute 1, lowest / highest sample', `${f1(Math.min(...s.samples.filter((x) => x.t >= WARM_UP_S).map((x) => x.rssMb)))} / ${f1(Math.max(...s.samples.filter((x) => x.t >= WARM_UP_S).map((x) => x.rssMb)))}`],
    ...vid.runs.flatMap((r): Array<[string, string]> => [
      [`POST /v1/videos c=${r.concurrency}: p50 / p99 ms`, `${f1(r.p50Ms)} / ${f1(r.p99Ms)}`],
      [`POST /v1/videos c=${r.concurrency}: req/s (202s / requests, errors)`, `${f1(r.rps)} (${r.accepted} / ${r.requests}, ${r.errors})`],
      [`job starts/s in Temporal, c=${r.concurrency} (mean / busiest second)`, `${f1(r.startsPerS)} / ${r.peakStartsPerS}`],
    ]),
    ...(vid.temporalOnly ? [['Temporal alone: workflow starts/s from a client, c=16 (p50 / p99 ms a start)', `${f1(vid.temporalOnly.perS)} (${f1(vid.temporalOnly.p50Ms)} / ${f1(vid.temporalOnly.p99Ms)})`] as [string, string]] : []),
    [`video jobs by status ${VIDEO_SETTLE_S} s after the last submit`, Object.entries(vid.statuses).map(([k, n]) => `${k} ${n}`).join(', ')],
    ['jobs worker RSS MB after the runs', f0(vid.workerRssMb)],
  ];
  const text = ['| measure | value |', '|---|---:|', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n');
  const targets = [
    `- ${s.slope <= TARGET_MB_PER_MIN ? 'met' : '**not met**'}: RSS growth at most ${TARGET_MB_PER_MIN} MB a minute over a 10-minute soak: ${f2(s.slope)} ± ${f2(s.slopeError)} MB/min over ${f1(l.seconds / 60)} min` +
      (SOAK_MINUTES < 10 ? ' (a shorter soak than the target names: indicative only)' : ''),
    `- recorded (no target): \`POST /v1/videos\` p99 ${vid.runs.map((r) => `${f1(r.p99Ms)} ms at c=${r.concurrency}`).join(', ')}; job starts ${vid.runs.map((r) => `${f1(r.startsPerS)}/s at c=${r.concurrency}`).join(', ')}`,
  ];
  return { text, targets };
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const startedAt = Date.now();
  const load0 = os.loadavg();
  const tool = findLoadTool();
  if (!tool) throw new Error('no load generator: install wrk (apt-get install -y wrk), or autocannon with npm install --prefix bench/peers');
  log(`load generator: ${tool.version}`);
  const work = workDir();
  const svc = await services(work);
  log(`services: ${svc.source}`);
  await applyMigrations(svc.databaseUrl);
  const sealingKeys = newKeyring();
  const mockUrl = await startMock(work);
  const api = await startGatewaySubject(work, 'gateway', 'gateway', svc, sealingKeys, mockUrl, { promptLogging: false });
  log(`gateway API pid ${api.pid}; soak: ${SOAK_MINUTES} min at c=${SOAK_CONNECTIONS}, RSS every ${SAMPLE_EVERY_S} s`);

  const s = await soak(tool, api, work);
  log(`soak: ${f0(s.load.rps)} req/s, errors ${s.load.errors}${s.load.errorSample ? ` (${s.load.errorSample.slice(0, 200)})` : ''}, RSS ${f1(s.rssStart)} -> ${f1(s.rssEnd)} MB, slope ${f2(s.slope)} ± ${f2(s.slopeError)} MB/min`);
  const vid = await videos(work, svc, sealingKeys, api);

  const { text, targets } = report(s, vid);
  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  console.log(`\n${text}\n\nTargets:\n${targets.join('\n')}\n`);

  const date = new Date().toISOString().slice(0, 10);
  const file = path.join(__dirname, 'results', `${date}-soak-and-jobs.md`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const interval = (i: number) => {
    const a = s.samples[i - 1];
    const b = s.samples[i]!;
    return a ? ` API CPU ${f0(((b.cpuS - a.cpuS) / (b.t - a.t)) * 100)}%` : '';
  };
  fs.writeFileSync(file, [
    `# Soak and video jobs, ${date}`,
    '',
    `\`npm run bench:soak\` (bench/soak-and-jobs.ts), ${minutes} minutes. The soak runs the \`gateway\` subject of side-by-side (API process started as production starts it; ` +
      `8 keys with the 50 000 rpm tier and a 1 000 000 USD monthly credit limit, request log on, prompt logging off) under wrk at c=${SOAK_CONNECTIONS}, non-streaming chat against bench/mock-upstream.ts, ` +
      `RSS (VmRSS) of the API sampled every ${SAMPLE_EVERY_S} s. The video runs use the same API process after the soak, the jobs worker (workers/jobs.ts) and the sandbox (sandbox/main.ts) as the provider; ` +
      `each \`POST /v1/videos\` (${VIDEO_MODEL}, 4 s) has its own prompt and Idempotency-Key, sent from the bench process with fetch, one request in flight per unit of concurrency, ${VIDEO_SECONDS} s per run. ` +
      'Job starts per second count the `videoJob` workflows Temporal lists as started during a run.',
    '',
    text,
    '',
    '## Targets (issue 11), as measured above',
    '',
    ...targets,
    '',
    '## Machine and run',
    '',
    ...machineLines(tool, svc, load0),
    `- soak ${SOAK_MINUTES} min (BENCH_SOAK_MINUTES), video runs ${VIDEO_SECONDS} s each (BENCH_VIDEO_SECONDS); the jobs worker starts after the soak, so it does not share the cores during it`,
    ...vid.notes.map((n) => `- ${n}`),
    '',
    '## RSS samples (API process)',
    '',
    'load: the machine\'s 1-minute load average at the sample (the bench\'s own processes count in it: API, wrk, mock, Postgres, Redis, Temporal); API CPU: the API\'s CPU time over the interval before the sample.',
    '',
    '```',
    ...s.samples.map((x, i) => `t=${f0(x.t).padStart(4)} s  RSS ${f1(x.rssMb).padStart(6)} MB  load ${f2(x.load1)}${interval(i)}${x.t < WARM_UP_S ? '  (warm-up, not in the slope)' : ''}`),
    '```',
    '',
    '## Video runs',
    '',
    '```',
    ...vid.runs.map((r) => `c=${r.concurrency} (load average ${f2(r.loadBefore)} before, ${f2(r.loadAfter)} after): ${r.requests} requests in ${f1(r.seconds)} s, ${r.accepted} answered 202, p50 ${f2(r.p50Ms)} ms, p99 ${f2(r.p99Ms)} ms; ${r.workflows} workflows started in the run (${f1(r.startsPerS)}/s, busiest second ${r.peakStartsPerS})${r.errorSample ? `; errors: ${r.errorSample}` : ''}`),
    `${vid.submitted} submits in all (warm-up included); jobs by status ${VIDEO_SETTLE_S} s after the last: ${JSON.stringify(vid.statuses)}`,
    '```',
    '',
  ].join('\n'));
  log(`wrote ${path.relative(path.join(__dirname, '..'), file)} (${minutes} min)`);
}

runBench(main);
