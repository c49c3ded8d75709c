/**
 * `npm run bench`: the gateway against the limit (a bare pass-through proxy) and a peer (the
 * Portkey gateway), each in its own process, in one run, interleaved, several rounds, medians.
 * See bench/README.md for what is measured and how to read it.
 *
 * BENCH_ROUNDS (3), BENCH_SECONDS (5 per load run), BENCH_PAIRS (8, the paired telemetry runs), BENCH_PAIR_SECONDS (4,
 * each half of a pair), BENCH_TOGETHER (windows at once), BENCH_TWINS (1: two processes a subject for
 * them), BENCH_SUBJECTS (comma list of subject ids)
 * tune it; BENCH_CPU_PROF=<folder> profiles the API subjects (bench/lib/cpu-prof-preload.ts) and
 * prints where their CPU went (bench/profile-summary.ts). Services: GW_DATA_DIR/runtime.json (what `npm start` runs), else DATABASE_URL /
 * REDIS_URL / TEMPORAL_ADDRESS, else it starts its own (embedded PostgreSQL, redis-server and a
 * Temporal dev server, in a temporary folder removed at the end).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { newKeyring } from '../core/crypto/sealing';
import { applyMigrations } from '../core/db/migrate';
import { freePort, waitFor } from '../scripts/lib/ports';
import { BENCH_CHAT_WIRE_MODEL, chatBody, messagesBody, responsesBody, startGatewaySubject, startMock, type TenantFeatures } from './lib/gateway';
import { findLoadTool, type LoadResult, type LoadTool } from './lib/load';
import { cpuSeconds, rssMb, threadCpuSeconds } from './lib/proc';
import { jaegerBinary, startJaeger } from '../scripts/lib/jaeger';
import { cleanups, log, node, productionNodeFlags, ROOT, runBench, THIS_TREE, waitForPort, workDir, type Tree } from './lib/processes';
import { f0, f1, f2, machineLines, median, pct, signed } from './lib/report';
import { serviceCounters, services, servicesCpu, type Services } from './lib/services';
import { streams, type StreamResult } from './lib/sse-client';
import { STREAM_CHUNKS, STREAM_GAP_MS } from './mock-upstream';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = [1, 32, 128] as const;
/** Streams timed for first chunk and gaps: started 40 ms apart, so arrivals do not queue behind each other. */
const STREAMS_TIMED = 32;
const STREAMS_TIMED_STAGGER_MS = 40;
const STREAMS_MANY = 512;
const PORTKEY_DIR = path.join(__dirname, 'peers');
const PORTKEY_START = path.join(PORTKEY_DIR, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');

const profiles: Array<{ label: string; pid: number; file: string }> = [];

type Subject = {
  id: 'bare' | 'koa_floor' | 'bare_baseline' | 'gateway_baseline' | GatewaySubjectId | 'portkey';
  label: string;
  pid: number;
  url: string;
  headers: Record<string, string>;
  bearers?: string[];
  model: string;
  /** The same, reaching the mock's 20 ms mode. */
  delayed: { url: string; headers: Record<string, string>; model: string };
  /** Redis and Postgres work on its behalf. */
  usesServices: boolean;
  /** The request it is sent, when not a chat completion. */
  body?: (model: string, stream?: boolean) => string;
  /** With BENCH_TWINS: a second process of the same subject, for the windows at once. */
  twin?: Subject;
};

const bodyOf = (s: Subject) => s.body ?? chatBody;

// ---------------------------------------------------------------- subjects

/**
 * The gateway subjects. All but the first two are opt-in (BENCH_SUBJECTS) and price features against
 * `gateway` in the same run: the response cache answering every request from Redis, and a
 * guardrail policy running every detector on input and output (issue 12); cost-center rules
 * matching and splitting every request (issue 23).
 */
const GATEWAY_SUBJECTS = [
  ['gateway', 'gateway', { promptLogging: false }],
  ['gateway_prompt_log', 'gateway, prompt log on', { promptLogging: true }],
  ['gateway_cache_hit', 'gateway, cache hits', { promptLogging: false, responseCache: true }],
  ['gateway_guardrails', 'gateway, guardrails', { promptLogging: false, guardrails: true }],
  ['gateway_cost_rules', 'gateway, cost-center rules', { promptLogging: false, costRules: true }],
  ['gateway_messages', 'gateway, /v1/messages to OpenAI', { promptLogging: false }],
  ['gateway_responses', 'gateway, /v1/responses to the chat wire', { promptLogging: false }],
  ['gateway_metrics', 'gateway, metrics on', { promptLogging: false }],
  ['gateway_telemetry', 'gateway, traces+metrics', { promptLogging: false }],
  ['gateway_telemetry_json', 'gateway, traces (OTLP JSON)+metrics', { promptLogging: false }],
  ['gateway_unsampled', 'gateway, traces unsampled+metrics', { promptLogging: false }],
  ['gateway_control', 'gateway, a second process', { promptLogging: false }],
] as const satisfies ReadonlyArray<readonly [string, string, TenantFeatures]>;
type GatewaySubjectId = (typeof GATEWAY_SUBJECTS)[number][0];

/**
 * Subjects whose API runs with settings of its own (issue 36): Prometheus metrics kept and served
 * on an ops port; and those with every request traced (the sampler's default, always on, said
 * outright) and exported over OTLP to a Jaeger started for the run (`otlpEndpoint`).
 */
const SUBJECT_ENV: Partial<Record<GatewaySubjectId, (otlpEndpoint: () => Promise<string>) => Promise<Record<string, string>>>> = {
  gateway_metrics: async () => ({ GW_OPS_PORT: '0', GW_OPS_HOST: '127.0.0.1' }),
  gateway_telemetry: async (otlpEndpoint) => ({ GW_OPS_PORT: '0', GW_OPS_HOST: '127.0.0.1', OTEL_EXPORTER_OTLP_ENDPOINT: await otlpEndpoint(), OTEL_TRACES_SAMPLER: 'always_on' }),
  gateway_telemetry_json: async (otlpEndpoint) => ({
    GW_OPS_PORT: '0', GW_OPS_HOST: '127.0.0.1', OTEL_EXPORTER_OTLP_ENDPOINT: await otlpEndpoint(), OTEL_TRACES_SAMPLER: 'always_on', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  }),
  // Traces on but no request sampled: the trace id, the middleware and the trace objects, nothing recorded or sent.
  gateway_unsampled: async (otlpEndpoint) => ({ GW_OPS_PORT: '0', GW_OPS_HOST: '127.0.0.1', OTEL_EXPORTER_OTLP_ENDPOINT: await otlpEndpoint(), OTEL_TRACES_SAMPLER: 'always_off' }),
};

/**
 * Where the traced subject exports: a Jaeger started once for the run (scripts/setup-jaeger builds
 * it), or with BENCH_OTLP=sink an OTLP receiver in this process that answers every export 200
 * and keeps nothing, so that a second process's work on the spans does not share the two cores
 * with the subject while its CPU is measured.
 */
function jaegerForRun(work: string): () => Promise<string> {
  let started: Promise<string> | undefined;
  if (process.env.BENCH_OTLP === 'sink') {
    return () => (started ??= (async () => {
      const server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    })());
  }
  return () => (started ??= (async () => {
    const binary = jaegerBinary();
    if (!binary) throw new Error('the traced subject needs Jaeger: bash scripts/setup-jaeger builds it once per machine');
    const jaeger = await startJaeger({ binary, dir: path.join(work, 'jaeger'), ports: { ui: await freePort(), otlpHttp: await freePort(), otlpGrpc: await freePort(), queryGrpc: await freePort(), health: await freePort() } });
    cleanups.push(() => jaeger.stop());
    return jaeger.otlpHttpUrl;
  })());
}

/**
 * Subjects that take another client protocol than chat completions (issue 35): its path, request
 * and, where it must not be the chat subject's, the model: a Responses request to an `openai`
 * connection goes to its own /responses as it came, so the translated row names a compatible
 * kind's connection to the same mock.
 */
const PROTOCOLS: Partial<Record<GatewaySubjectId, { path: string; body: (model: string, stream?: boolean) => string; model?: string }>> = {
  gateway_messages: { path: '/v1/messages', body: messagesBody },
  gateway_responses: { path: '/v1/responses', body: responsesBody, model: BENCH_CHAT_WIRE_MODEL },
};

async function ensurePortkey(): Promise<void> {
  if (fs.existsSync(PORTKEY_START)) return;
  log(`installing the peers into ${path.relative(ROOT, PORTKEY_DIR)} (npm install --prefix bench/peers; once)...`);
  const r = spawnSync('npm', ['install', '--prefix', PORTKEY_DIR, '--no-audit', '--no-fund'], { stdio: 'inherit', cwd: ROOT });
  if (r.status !== 0 || !fs.existsSync(PORTKEY_START)) throw new Error('npm install --prefix bench/peers failed; see above');
}

async function startSubjects(work: string, svc: Services): Promise<{ subjects: Subject[]; mockUrl: string; notes: string[] }> {
  const notes: string[] = [];
  const wanted = new Set((process.env.BENCH_SUBJECTS ?? 'bare,gateway,gateway_prompt_log,portkey').split(','));
  const mockUrl = await startMock(work);
  const subjects: Subject[] = [];

  /** A subject that is one script in front of the mock (`<script> <port> <upstream>`), with the mock's own key. */
  const startScript = async (id: 'bare' | 'koa_floor' | 'bare_baseline', label: string, script: string, tree: Tree = THIS_TREE): Promise<Subject> => {
    const port = await freePort();
    const file = path.join(work, `${id}.log`);
    const child = node(['--import', 'tsx', script, String(port), mockUrl], { NODE_ENV: 'production' }, file, tree);
    await waitForPort(`the ${label}`, port, child, file);
    const headers = { authorization: 'Bearer sk-mock-bench' };
    return {
      id, label, pid: child.pid!, url: `http://127.0.0.1:${port}/v1/chat/completions`, headers, model: 'gpt-4o-mini', usesServices: false,
      delayed: { url: `http://127.0.0.1:${port}/delay20/v1/chat/completions`, headers, model: 'gpt-4o-mini' },
    };
  };
  if (wanted.has('bare')) subjects.push(await startScript('bare', 'bare proxy', 'bench/bare-proxy.ts'));
  // Opt-in: the least a chat gateway on this stack does (bench/koa-floor.ts).
  if (wanted.has('koa_floor')) subjects.push(await startScript('koa_floor', 'stack floor (Koa, JSON)', 'bench/koa-floor.ts'));

  // Another checkout on another Node in the same run (before and after a change, Node 20 and 24):
  // BENCH_BASELINE=<its folder>, BENCH_BASELINE_NODE=<its node>; subjects bare_baseline and
  // gateway_baseline (the plain gateway, as `gateway` is here). It builds its own dist/.
  const baseline: Tree | null = process.env.BENCH_BASELINE ? { root: path.resolve(process.env.BENCH_BASELINE), node: process.env.BENCH_BASELINE_NODE ?? process.execPath } : null;
  const baselineLabel = () => {
    const version = spawnSync(baseline!.node, ['--version'], { encoding: 'utf8' }).stdout.trim();
    const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: baseline!.root, encoding: 'utf8' }).stdout.trim();
    return `baseline ${commit || path.basename(baseline!.root)}, node ${version}`;
  };
  if (wanted.has('bare_baseline') || wanted.has('gateway_baseline')) {
    if (!baseline) throw new Error('the baseline subjects need BENCH_BASELINE (a checkout to compare with) and BENCH_BASELINE_NODE');
    notes.push(`baseline: ${baseline.root} on ${baseline.node} (${baselineLabel()})`);
  }
  if (wanted.has('bare_baseline')) subjects.push(await startScript('bare_baseline', `bare proxy (${baselineLabel()})`, 'bench/bare-proxy.ts', baseline!));

  const flagsNote = (tree: Tree) => productionNodeFlags(tree).join(' ') || 'no flags';
  notes.push(`node flags of the gateway's API, as its package.json \`api\` script starts it: ${flagsNote(THIS_TREE)}${process.env.BENCH_API_NODE_ARGS ? `, then BENCH_API_NODE_ARGS ${process.env.BENCH_API_NODE_ARGS}` : ''}${baseline ? `; the baseline's: ${flagsNote(baseline)}${process.env.BENCH_BASELINE_NODE_ARGS ? `, then BENCH_BASELINE_NODE_ARGS ${process.env.BENCH_BASELINE_NODE_ARGS}` : ''}` : ''}`);
  const sealingKeys = newKeyring();
  const otlpEndpoint = jaegerForRun(work);
  const startGateway = async ([id, label, features]: (typeof GATEWAY_SUBJECTS)[number], twin: boolean): Promise<Subject> => {
    const profile = process.env.BENCH_CPU_PROF && !twin ? path.resolve(process.env.BENCH_CPU_PROF, `${id}.cpuprofile`) : undefined;
    const api = await startGatewaySubject(work, twin ? `${id}_twin` : id, label, svc, sealingKeys, mockUrl, features, {
      preload: profile ? ['./bench/lib/cpu-prof-preload.ts'] : [],
      env: { BENCH_CPU_PROF_FILE: profile, ...(await SUBJECT_ENV[id]?.(otlpEndpoint)) },
    });
    if (profile) profiles.push({ label, pid: api.pid, file: profile });
    const protocol = PROTOCOLS[id];
    const url = `${api.apiUrl}${protocol?.path ?? '/v1/chat/completions'}`;
    return { id, label: twin ? `${label} (twin)` : label, pid: api.pid, url, headers: {}, bearers: api.keys, model: protocol?.model ?? 'openai/gpt-4o-mini', usesServices: true, delayed: { url, headers: {}, model: 'bench-delay20' }, body: protocol?.body };
  };
  const gateways = GATEWAY_SUBJECTS.filter(([id]) => wanted.has(id));
  for (const entry of gateways) subjects.push(await startGateway(entry, false));
  if (wanted.has('gateway_baseline')) {
    const label = `gateway (${baselineLabel()})`;
    const api = await startGatewaySubject(work, 'gateway_baseline', label, svc, sealingKeys, mockUrl, { promptLogging: false }, { tree: baseline! });
    const url = `${api.apiUrl}/v1/chat/completions`;
    subjects.push({ id: 'gateway_baseline', label, pid: api.pid, url, headers: {}, bearers: api.keys, model: 'openai/gpt-4o-mini', usesServices: true, delayed: { url, headers: {}, model: 'bench-delay20' } });
  }
  // Twins start in the reverse order (A B B' A'), so no kind of subject is always the older process.
  if (TWINS) {
    for (const entry of [...gateways].reverse()) {
      if (entry[0] !== 'gateway' && !PAIRED_SUBJECTS.includes(entry[0])) continue;
      subjects.find((s) => s.id === entry[0])!.twin = await startGateway(entry, true);
    }
  }

  if (wanted.has('portkey')) {
    try {
      await ensurePortkey();
      const port = await freePort();
      const file = path.join(work, 'portkey.log');
      const child = node([PORTKEY_START, `--port=${port}`, '--headless'], { NODE_ENV: 'production', TRUSTED_CUSTOM_HOSTS: '127.0.0.1' }, file);
      await waitForPort('the Portkey gateway', port, child, file);
      const url = `http://127.0.0.1:${port}/v1/chat/completions`;
      const headers = { authorization: 'Bearer sk-mock-bench', 'x-portkey-provider': 'openai' };
      subjects.push({
        id: 'portkey',
        label: `Portkey ${portkeyVersion()}`,
        pid: child.pid!,
        url,
        headers: { ...headers, 'x-portkey-custom-host': `${mockUrl}/v1` },
        model: 'gpt-4o-mini',
        usesServices: false,
        delayed: { url, headers: { ...headers, 'x-portkey-custom-host': `${mockUrl}/delay20/v1` }, model: 'gpt-4o-mini' },
      });
    } catch (err) {
      notes.push(`The Portkey gateway did not run: ${(err as Error).message}`);
      log(`Portkey skipped: ${(err as Error).message}`);
    }
  }
  return { subjects, mockUrl, notes };
}

function portkeyVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(path.dirname(PORTKEY_START), '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

// ---------------------------------------------------------------- measurement

type Round = {
  load: Record<string, LoadResult & { cpuUsPerReq: number; servicesUsPerReq: number; redisPerReq: number; redisTop: string; pgTxPerReq: number; pgRowsPerReq: number }>;
  ttfcP50: number;
  ttfcP99: number;
  /** Every timed stream's first-chunk time and every gap, so percentiles can pool the rounds. */
  ttfcSamples: number[];
  gapSamples: number[];
  gapP50: number;
  gapP99: number;
  timedOk: number;
  manyOk: number;
  manyErrors: string[];
};

/** What a load run sends to a subject (or to its `delayed` twin): its chat body, headers and keys. */
function loadSpec(s: Subject, target: { url: string; headers: Record<string, string>; model: string }, connections: number, seconds: number) {
  return { url: target.url, headers: { 'content-type': 'application/json', ...target.headers }, bearers: s.bearers, body: bodyOf(s)(target.model), connections, seconds };
}

async function load(tool: LoadTool, s: Subject, svc: Services, work: string, connections: number, delayed = false, seconds = SECONDS) {
  const cpu0 = cpuSeconds(s.pid);
  const svc0 = servicesCpu(svc);
  const target = delayed ? s.delayed : s;
  const count0 = s.usesServices ? await svc.counters?.() : undefined;
  const r = await tool.run(loadSpec(s, target, connections, seconds), work);
  const n = Math.max(1, r.requests);
  const cpuUsPerReq = ((cpuSeconds(s.pid) - cpu0) / n) * 1e6;
  const servicesUsPerReq = ((servicesCpu(svc) - svc0) / n) * 1e6;
  let count1 = count0;
  if (count0) {
    await new Promise((resolve) => setTimeout(resolve, 1500)); // batched rows and statistics settle
    count1 = await svc.counters!();
  }
  const per = (k: 'redisCommands' | 'pgTransactions' | 'pgInserted') => (count0 && count1 ? (count1[k] - count0[k]) / n : NaN);
  // Commands run inside Lua scripts count too (Redis's commandstats counts them).
  const redisTop = count0 && count1
    ? [...count1.redisByCommand].map(([cmd, calls]) => [cmd, (calls - (count0.redisByCommand.get(cmd) ?? 0)) / n] as const)
      .filter(([, per]) => per >= 0.05).sort((a, b) => b[1] - a[1]).map(([cmd, per]) => `${cmd} ${per.toFixed(1)}`).join(', ')
    : '';
  return { ...r, cpuUsPerReq, servicesUsPerReq, redisPerReq: per('redisCommands'), redisTop, pgTxPerReq: per('pgTransactions'), pgRowsPerReq: per('pgInserted') };
}

const streamHeaders = (s: Subject) => ({ ...s.headers, ...(s.bearers && { authorization: `Bearer ${s.bearers[0]}` }) });

/**
 * Seconds of load a subject gets, unmeasured, at the start of its turn in every round. While the
 * other subjects run, a subject idles for minutes, and a process woken from that is slow for a
 * while: the bare proxy used 773 µs of CPU a request in its first second against 180 µs once
 * warm, the gateway three times its warm figure for about four seconds. Unwarmed, the c=1 run
 * (the first of each turn) measured the wake-up, not the subject.
 */
const REWARM_SECONDS = 3;

async function measure(tool: LoadTool, s: Subject, svc: Services, work: string): Promise<Round> {
  await load(tool, s, svc, work, 1, false, REWARM_SECONDS);
  const loadRuns: Round['load'] = {};
  for (const c of CONCURRENCY) loadRuns[`c${c}`] = await load(tool, s, svc, work, c);
  loadRuns.c128_delay20 = await load(tool, s, svc, work, 128, true);
  const timed = await streams(STREAMS_TIMED, s.url, streamHeaders(s), bodyOf(s)(s.model, true), STREAMS_TIMED_STAGGER_MS);
  const many = await streams(STREAMS_MANY, s.url, streamHeaders(s), bodyOf(s)(s.model, true));
  const ttfc = timed.filter((t) => t.ok).map((t) => t.ttfcMs);
  const gaps = timed.filter((t) => t.ok).flatMap((t) => t.gapsMs);
  return {
    load: loadRuns,
    ttfcSamples: ttfc,
    gapSamples: gaps,
    ttfcP50: pct(ttfc, 50),
    ttfcP99: pct(ttfc, 99),
    gapP50: pct(gaps, 50),
    gapP99: pct(gaps, 99),
    timedOk: timed.filter((t) => t.ok).length,
    manyOk: many.filter((t) => t.ok).length,
    manyErrors: distinctErrors(many),
  };
}

function distinctErrors(results: StreamResult[]): string[] {
  const counts = new Map<string, number>();
  for (const r of results) if (!r.ok) counts.set(r.error ?? '?', (counts.get(r.error ?? '?') ?? 0) + 1);
  return [...counts].map(([e, n]) => `${n}x ${e.slice(0, 160)}`);
}

async function warm(tool: LoadTool, s: Subject, svc: Services, work: string): Promise<void> {
  for (const r of [await load(tool, s, svc, work, 32, false, 2), await load(tool, s, svc, work, 8, true, 1)]) {
    if (r.errors) log(`  warning: ${r.errors} errors warming ${s.label}: ${r.errorSample ?? ''}`);
  }
  const first = await streams(4, s.url, streamHeaders(s), bodyOf(s)(s.model, true));
  const bad = first.find((r) => !r.ok);
  if (bad) log(`  warning: a warm-up stream through ${s.label} failed: ${bad.error}`);
}

/**
 * Issue 36's bar (traces and metrics add at most 10% CPU a request), measured in pairs: the
 * untraced gateway and a telemetry subject alternate at c=32 a few seconds each, the first of a
 * pair alternating too, and each pair gives one ratio. The rounds above run each subject for
 * about 40 s at a time, and on a shared two-core machine a subject's figure moved with the round
 * and its place in it by as much as this cost (bench/results/2026-11-27-issue-36-traces.md);
 * a pair's two halves are seconds apart, so the machine's drift cancels in its ratio.
 */
const PAIRS = Number(process.env.BENCH_PAIRS ?? 8);
const PAIR_SECONDS = Number(process.env.BENCH_PAIR_SECONDS ?? 4);
const PAIR_WARM_SECONDS = 5;
/** `gateway_control` is the untraced gateway again, in a process started last: what the method reads when nothing differs. */
const PAIRED_SUBJECTS: ReadonlyArray<Subject['id']> = ['gateway_metrics', 'gateway_unsampled', 'gateway_telemetry', 'gateway_telemetry_json', 'gateway_control'];

type ThreadSplit = { mainUser: number; mainSystem: number; helpers: number };
/** Per pair, the other subject's figure over the base's; `split` the same for the CPU's parts. */
type Paired = { subject: Subject; ratios: number[]; split: ThreadSplit[] };

/** CPU µs a request by thread between two `/proc` readings; `minus` the other subject's, for a pair's split. */
function perRequest(before: ThreadSplit, after: ThreadSplit, requests: number): ThreadSplit {
  const per = (k: keyof ThreadSplit) => ((after[k] - before[k]) / Math.max(1, requests)) * 1e6;
  return { mainUser: per('mainUser'), mainSystem: per('mainSystem'), helpers: per('helpers') };
}
const minus = (o: ThreadSplit, b: ThreadSplit): ThreadSplit => ({ mainUser: o.mainUser - b.mainUser, mainSystem: o.mainSystem - b.mainSystem, helpers: o.helpers - b.helpers });

async function pairedCpu(tool: LoadTool, base: Subject, other: Subject, svc: Services, work: string): Promise<Paired> {
  const paired: Paired = { subject: other, ratios: [], split: [] };
  // A subject that sat idle through another's pairs read 35-50% high in its first pairs, its
  // collector's helper threads busy: it runs a while, unmeasured, before its pairs begin.
  await load(tool, other, svc, work, 32, false, PAIR_WARM_SECONDS);
  for (let i = 0; i < PAIRS; i++) {
    const cpu = new Map<string, number>();
    const parts = new Map<string, ThreadSplit>();
    for (const s of i % 2 === 0 ? [base, other] : [other, base]) {
      await load(tool, s, svc, work, 32, false, 1);
      const before = threadCpuSeconds(s.pid);
      const r = await load(tool, s, svc, work, 32, false, PAIR_SECONDS);
      const after = threadCpuSeconds(s.pid);
      cpu.set(s.id, r.cpuUsPerReq);
      parts.set(s.id, perRequest(before, after, r.requests));
    }
    paired.ratios.push(cpu.get(other.id)! / cpu.get(base.id)!);
    const [b, o] = [parts.get(base.id)!, parts.get(other.id)!];
    paired.split.push(minus(o, b));
    log(`pair ${i + 1}/${PAIRS} ${other.label}: ${signedPct(paired.ratios.at(-1)!)} CPU a request over ${base.label} ` +
      `(µs: main thread user ${f0(b.mainUser)} -> ${f0(o.mainUser)}, system ${f0(b.mainSystem)} -> ${f0(o.mainSystem)}, other threads ${f0(b.helpers)} -> ${f0(o.helpers)})`);
  }
  return paired;
}

/**
 * The same ratio measured with both subjects under load at once: two load runs at c=32 start
 * together, and each process's CPU a request is read over the same seconds. Alternated pairs
 * still see the machine change between their halves (a shared two-core VM's speed moved by
 * 20% from one 8 s run to the next, bench/results/2026-11-27-issue-36-traces.md, session 11);
 * at once, whatever slows the machine slows both. The two compete for the cores, each with the
 * same scheduler share, so a costlier subject serves fewer requests and its fixed per-second
 * work (flush steps, timers) is spread over fewer of them: if anything, this reads high.
 * `BENCH_TOGETHER` windows (default as many as `BENCH_PAIRS`) of `BENCH_PAIR_SECONDS`.
 */
const TOGETHER = Number(process.env.BENCH_TOGETHER ?? PAIRS);

/**
 * BENCH_TWINS=1: each subject of the windows at once (and the untraced gateway) runs in two
 * processes, started A B B' A', and the windows take the four pairings in turn. Two processes
 * of the same code differ by a few percent in CPU a request (a JIT inlines differently; the
 * older has run longer): the control, the untraced gateway in a second process, read +1.6% to
 * +5% over the first (bench/results/2026-11-27-issue-36-traces.md, run 44). With twins that
 * difference is averaged over the pairings rather than falling on one side.
 */
const TWINS = process.env.BENCH_TWINS === '1';
const TOGETHER_WARM_SECONDS = TWINS ? 8 : 2;

/** The pairings the windows at once take in turn: the two subjects, or with twins each process of one with each of the other. */
function pairings(base: Subject, other: Subject): Array<readonly [Subject, Subject]> {
  if (!base.twin || !other.twin) return [[base, other]];
  return [[base, other], [base.twin, other.twin], [base, other.twin], [base.twin, other]];
}

async function togetherCpu(tool: LoadTool, firstBase: Subject, firstOther: Subject, work: string): Promise<Paired> {
  const together: Paired = { subject: firstOther, ratios: [], split: [] };
  const run = (s: Subject, seconds: number) => tool.run(loadSpec(s, s, 32, seconds), work);
  const turns = pairings(firstBase, firstOther);
  // Unmeasured first: a twin has had only its warm-up, not the rounds.
  for (const [base, other] of turns.slice(0, 2)) await Promise.all([run(base, TOGETHER_WARM_SECONDS), run(other, TOGETHER_WARM_SECONDS)]);
  for (let i = 0; i < TOGETHER; i++) {
    const [base, other] = turns[i % turns.length]!;
    const cpu0 = [cpuSeconds(base.pid), cpuSeconds(other.pid)] as const;
    const before = [threadCpuSeconds(base.pid), threadCpuSeconds(other.pid)] as const;
    const [rb, ro] = await Promise.all([run(base, PAIR_SECONDS), run(other, PAIR_SECONDS)]);
    const after = [threadCpuSeconds(base.pid), threadCpuSeconds(other.pid)] as const;
    const cpu1 = [cpuSeconds(base.pid), cpuSeconds(other.pid)] as const;
    const [b, o] = [perRequest(before[0], after[0], rb.requests), perRequest(before[1], after[1], ro.requests)];
    together.ratios.push((cpu1[1] - cpu0[1]) / Math.max(1, ro.requests) / ((cpu1[0] - cpu0[0]) / Math.max(1, rb.requests)));
    together.split.push(minus(o, b));
    log(`at once ${i + 1}/${TOGETHER} ${other.label}: ${signedPct(together.ratios.at(-1)!)} CPU a request over ${base.label} ` +
      `(${f0(rb.rps)} and ${f0(ro.rps)} req/s; µs: main thread user ${f0(b.mainUser)} -> ${f0(o.mainUser)}, ` +
      `system ${f0(b.mainSystem)} -> ${f0(o.mainSystem)}, other threads ${f0(b.helpers)} -> ${f0(o.helpers)})`);
  }
  return together;
}

const signedPct = (ratio: number) => `${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(1)}%`;

function pairedLines(base: Subject, paired: Paired[], together: Paired[]): string[] {
  if (paired.length === 0 && together.length === 0) return [];
  const rows = (list: Paired[]) => list.map((p) => `| ${p.subject.label} | ${signedPct(median(p.ratios))} | ${(['mainUser', 'mainSystem', 'helpers'] as const).map((k) => signed(median(p.split.map((x) => x[k])))).join(' / ')} | ${p.ratios.map(signedPct).join(', ')} |`);
  const head = ['| subject | median | µs a request added: main thread user / system, other threads (medians) | ratios |', '|---|---:|---:|---|'];
  const bar = (list: Paired[], how: string) => list.filter((p) => p.subject.id === 'gateway_telemetry').map((p) =>
    `- ${median(p.ratios) <= 1.1 ? 'met' : '**not met**'}: traces exported at full sampling and metrics on add at most 10% CPU a request: ${signedPct(median(p.ratios))} (median of ${p.ratios.length} ${how})`);
  return [
    `## Telemetry's added CPU, paired (issue 36)`,
    '',
    ...(paired.length ? [
      `Subject CPU a request at c=32 over ${base.label}'s, ${PAIRS} pairs of ${PAIR_SECONDS} s runs each (after 1 s unmeasured), alternated.`,
      '', ...head, ...rows(paired), '', ...bar(paired, 'alternated pairs'), '',
    ] : []),
    ...(together.length ? [
      `The same, both under load at once (c=32 each): ${TOGETHER} windows of ${PAIR_SECONDS} s, each subject's CPU a request over the same seconds${TWINS ? '; each subject in two processes (BENCH_TWINS), the windows taking the four pairings in turn' : ''}.`,
      '', ...head, ...rows(together), '', ...bar(together, 'windows at once'), '',
    ] : []),
  ];
}

// ---------------------------------------------------------------- report

type Summary = { subject: Subject; rounds: Round[]; rssIdle: number; rssAfter: number };

/** A percentile of one sample kind pooled over every round. */
const pooled = (s: Summary, k: 'ttfcSamples' | 'gapSamples', p: number) => pct(s.rounds.flatMap((r) => r[k]), p);

function table(summaries: Summary[]): { text: string; gaps: string[] } {
  const m = (s: Summary, get: (r: Round) => number) => median(s.rounds.map(get));
  const bare = summaries.find((s) => s.subject.id === 'bare');
  const peer = summaries.find((s) => s.subject.id === 'portkey');
  const rows: Array<[string, (s: Summary) => string]> = [
    ['req/s, c=1', (s) => f0(m(s, (r) => r.load.c1!.rps))],
    ['req/s, c=32', (s) => f0(m(s, (r) => r.load.c32!.rps))],
    ['req/s, c=128', (s) => f0(m(s, (r) => r.load.c128!.rps))],
    ['req/s, c=128, upstream 20 ms', (s) => f0(m(s, (r) => r.load.c128_delay20!.rps))],
    ['x bare proxy, c=32', (s) => (bare ? f2(m(s, (r) => r.load.c32!.rps) / m(bare, (r) => r.load.c32!.rps)) : 'n/a')],
    ['x bare proxy, c=128', (s) => (bare ? f2(m(s, (r) => r.load.c128!.rps) / m(bare, (r) => r.load.c128!.rps)) : 'n/a')],
    ['x peer, c=128', (s) => (peer ? f2(m(s, (r) => r.load.c128!.rps) / m(peer, (r) => r.load.c128!.rps)) : 'n/a')],
    ['p50 / p99 ms, c=1', (s) => `${f2(m(s, (r) => r.load.c1!.p50Ms))} / ${f2(m(s, (r) => r.load.c1!.p99Ms))}`],
    ['added p50 / p99 ms, c=1', (s) => (bare ? `${signed(m(s, (r) => r.load.c1!.p50Ms) - m(bare, (r) => r.load.c1!.p50Ms))} / ${signed(m(s, (r) => r.load.c1!.p99Ms) - m(bare, (r) => r.load.c1!.p99Ms))}` : 'n/a')],
    ['p50 / p99 ms, c=128', (s) => `${f1(m(s, (r) => r.load.c128!.p50Ms))} / ${f1(m(s, (r) => r.load.c128!.p99Ms))}`],
    ['errors (all runs, all rounds)', (s) => f0(s.rounds.reduce((a, r) => a + Object.values(r.load).reduce((b, l) => b + l.errors, 0), 0))],
    ['subject CPU µs/req, c=32', (s) => f0(m(s, (r) => r.load.c32!.cpuUsPerReq))],
    ['Postgres+Redis CPU µs/req, c=32', (s) => (s.subject.usesServices ? f0(m(s, (r) => r.load.c32!.servicesUsPerReq)) : '-')],
    ['Redis commands / Postgres transactions / rows inserted per req, c=32', (s) => (s.subject.usesServices ? `${f1(m(s, (r) => r.load.c32!.redisPerReq))} / ${f2(m(s, (r) => r.load.c32!.pgTxPerReq))} / ${f2(m(s, (r) => r.load.c32!.pgRowsPerReq))}` : '-')],
    ['RSS MB idle / after load', (s) => `${f0(s.rssIdle)} / ${f0(s.rssAfter)}`],
    [`stream first chunk p50 / p99 ms (${ROUNDS * STREAMS_TIMED} streams)`, (s) => `${f2(pooled(s, 'ttfcSamples', 50))} / ${f2(pooled(s, 'ttfcSamples', 99))}`],
    ['added first chunk p50 / p99 ms', (s) => (bare ? `${signed(pooled(s, 'ttfcSamples', 50) - pooled(bare, 'ttfcSamples', 50))} / ${signed(pooled(s, 'ttfcSamples', 99) - pooled(bare, 'ttfcSamples', 99))}` : 'n/a')],
    [`chunk gap p50 / p99 ms (mock: ${STREAM_GAP_MS})`, (s) => `${f1(pooled(s, 'gapSamples', 50))} / ${f1(pooled(s, 'gapSamples', 99))}`],
    [`${STREAMS_MANY} concurrent streams complete (worst round)`, (s) => `${Math.min(...s.rounds.map((r) => r.manyOk))} / ${STREAMS_MANY}`],
  ];
  const head = `| | ${summaries.map((s) => s.subject.label).join(' | ')} |\n|---|${summaries.map(() => '---:').join('|')}|`;
  const text = [head, ...rows.map(([name, get]) => `| ${name} | ${summaries.map(get).join(' | ')} |`)].join('\n');

  const gaps: string[] = [];
  const full = summaries.find((s) => s.subject.id === 'gateway_prompt_log') ?? summaries.find((s) => s.subject.id === 'gateway');
  const gws = summaries.filter((s) => s.subject.id === 'gateway' || s.subject.id === 'gateway_prompt_log');
  if (full && bare) {
    const check = (ok: boolean, what: string) => gaps.push(`- ${ok ? 'met' : '**not met**'}: ${what}`);
    /** The gateway subject that does worst on a measure (higher is worse), and its value. */
    const worst = (value: (s: Summary) => number) => gws.map((s) => ({ s, v: value(s) })).reduce((a, b) => (b.v > a.v ? b : a));
    const by = (w: { s: Summary }) => (gws.length > 1 ? ` (${w.s.subject.label}, the worse of the two)` : '');
    // Issue 21's bars. CPU per request at c=32 compares work done whatever the machine's load;
    // throughput at c=32 against the bare proxy and the peer in the same run.
    const cpu = worst((s) => m(s, (r) => r.load.c32!.cpuUsPerReq) / m(bare, (r) => r.load.c32!.cpuUsPerReq));
    check(cpu.v <= 3, `API CPU per request at c=32 at most 3x the bare proxy's: ${f2(cpu.v)}x (${f0(m(cpu.s, (r) => r.load.c32!.cpuUsPerReq))} against ${f0(m(bare, (r) => r.load.c32!.cpuUsPerReq))} µs)${by(cpu)}`);
    const slow = worst((s) => -m(s, (r) => r.load.c32!.rps));
    const ratio = -slow.v / m(bare, (r) => r.load.c32!.rps);
    check(ratio >= 0.3, `throughput at c=32 at least 0.3x the bare proxy: ${f2(ratio)}x${by(slow)}`);
    if (peer) {
      const vsPeer = -slow.v / m(peer, (r) => r.load.c32!.rps);
      check(vsPeer >= 4, `throughput at c=32 at least 4x the peer's: ${f2(vsPeer)}x${by(slow)}`);
    } else gaps.push('- not measured: the ratio to the peer (the peer did not run)');
    const a50 = worst((s) => m(s, (r) => r.load.c1!.p50Ms) - m(bare, (r) => r.load.c1!.p50Ms));
    const a99 = worst((s) => m(s, (r) => r.load.c1!.p99Ms) - m(bare, (r) => r.load.c1!.p99Ms));
    check(a50.v <= 0.4, `added p50 at c=1 at most 0.4 ms: ${signed(a50.v)} ms${by(a50)}`);
    check(a99.v <= 2, `added p99 at c=1 at most 2 ms: ${signed(a99.v)} ms${by(a99)}`);
    // Tails of a few dozen streams on a shared machine are noisy; a median already above the
    // target decides it whatever the difference of the tails says.
    const t50 = worst((s) => pooled(s, 'ttfcSamples', 50) - pooled(bare, 'ttfcSamples', 50));
    const t99 = worst((s) => pooled(s, 'ttfcSamples', 99) - pooled(bare, 'ttfcSamples', 99));
    check(t99.v <= 1 && t50.v <= 1, `added time to first chunk p99 at most 1 ms: p99 ${signed(t99.v)} ms${by(t99)}, p50 ${signed(t50.v)} ms${by(t50)}`);
    const lost = worst((s) => STREAMS_MANY - Math.min(...s.rounds.map((r) => r.manyOk)));
    check(lost.v === 0, `${STREAMS_MANY} concurrent streams with no chunk lost: ${STREAMS_MANY - lost.v} complete in the worst round${by(lost)}`);
    const rss = worst((s) => s.rssAfter);
    check(rss.v <= 200, `RSS at most 200 MB after load: ${f0(rss.v)} MB${by(rss)}`);
    gaps.push('- not measured by this harness: RSS growth over the 10-minute soak (`npm run bench:soak`)');
  }
  return { text, gaps };
}

function machineNotes(tool: LoadTool, svc: Services, load0: number[]): string[] {
  return [
    ...machineLines(tool, svc, load0),
    `- ${ROUNDS} rounds, subjects interleaved (the starting subject rotates each round), ${SECONDS} s per load run, medians of the rounds`,
  ];
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const started = Date.now();
  const load0 = os.loadavg();
  const tool = findLoadTool();
  if (!tool) {
    throw new Error('no load generator: install wrk (apt-get install -y wrk), or autocannon with npm install --prefix bench/peers');
  }
  log(`load generator: ${tool.version}`);
  const work = workDir();

  const svc = await services(work);
  log(`services: ${svc.source}`);
  await applyMigrations(svc.databaseUrl);
  svc.counters = await serviceCounters(svc);
  const { subjects, notes } = await startSubjects(work, svc);
  log(`subjects: ${subjects.map((s) => `${s.label} (pid ${s.pid})`).join(', ')}`);

  const rssIdle = new Map(subjects.map((s) => [s.id, rssMb(s.pid)]));
  for (const s of subjects.flatMap((x) => (x.twin ? [x, x.twin] : [x]))) {
    log(`warming ${s.label}...`);
    await warm(tool, s, svc, work);
  }
  const rounds = new Map<string, Round[]>(subjects.map((s) => [s.id, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!);
    for (const s of order) {
      const r = await measure(tool, s, svc, work);
      rounds.get(s.id)!.push(r);
      log(`round ${round + 1}/${ROUNDS} ${s.label.padEnd(24)} ${CONCURRENCY.map((c) => `c${c} ${f0(r.load[`c${c}`]!.rps)}`).join('  ')} req/s  20ms ${f0(r.load.c128_delay20!.rps)}  ` +
        `errors ${Object.values(r.load).reduce((a, l) => a + l.errors, 0)}  streams ${r.manyOk}/${STREAMS_MANY}${r.manyErrors.length ? ` (${r.manyErrors.join('; ')})` : ''}`);
      for (const [k, l] of Object.entries(r.load)) if (l.errorSample) log(`  ${k} errors, first answers: ${l.errorSample.slice(0, 300)}`);
    }
  }
  const base = subjects.find((s) => s.id === 'gateway');
  const paired: Paired[] = [];
  const together: Paired[] = [];
  for (const s of subjects) if (base && PAIRS > 0 && PAIRED_SUBJECTS.includes(s.id)) paired.push(await pairedCpu(tool, base, s, svc, work));
  for (const s of subjects) if (base && TOGETHER > 0 && PAIRED_SUBJECTS.includes(s.id)) together.push(await togetherCpu(tool, base, s, work));
  const summaries: Summary[] = subjects.map((s) => ({ subject: s, rounds: rounds.get(s.id)!, rssIdle: rssIdle.get(s.id)!, rssAfter: rssMb(s.pid) }));
  const { text, gaps } = table(summaries);
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  console.log(`\n${text}\n`);
  if (gaps.length) console.log(`Targets:\n${gaps.join('\n')}\n`);

  const date = new Date().toISOString().slice(0, 10);
  // A profiled run is slower: its table goes beside the profiles, not into bench/results.
  const file = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF, 'side-by-side.md') : path.join(__dirname, 'results', `${date}-side-by-side.md`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(
    file,
    [
      `# Side by side, ${date}`,
      '',
      `\`npm run bench\` (bench/side-by-side.ts), ${minutes} minutes. Each subject in its own process; medians of ${ROUNDS} rounds. ` +
        `Upstream: bench/mock-upstream.ts in its own process (1.4 KB chat answer; streams of ${STREAM_CHUNKS} chunks ${STREAM_GAP_MS} ms apart).`,
      '',
      text,
      '',
      '## Targets (issue 21), as measured above',
      '',
      ...gaps,
      '',
      ...(base ? pairedLines(base, paired, together) : []),
      '## Machine and run',
      '',
      ...machineNotes(tool, svc, load0),
      ...notes.map((n) => `- ${n}`),
      '',
      '## Per round',
      '',
      '```',
      ...summaries.flatMap((s) => s.rounds.map((r, i) =>
        `${s.subject.label.padEnd(24)} round ${i + 1}: ` +
          Object.entries(r.load).map(([k, l]) => `${k} ${f0(l.rps)}/s p50 ${f2(l.p50Ms)} p99 ${f2(l.p99Ms)} err ${l.errors} cpu ${f0(l.cpuUsPerReq)}µs svc ${f0(l.servicesUsPerReq)}µs${Number.isNaN(l.redisPerReq) ? '' : ` redis ${f1(l.redisPerReq)} (${l.redisTop}) pg tx ${f2(l.pgTxPerReq)} rows ${f2(l.pgRowsPerReq)}`}`).join('; ') +
          Object.entries(r.load).filter(([, l]) => l.errorSample).map(([k, l]) => `; ${k} error answers: ${l.errorSample!.slice(0, 200)}`).join('') +
          `; ttfc ${f2(r.ttfcP50)}/${f2(r.ttfcP99)} gap ${f1(r.gapP50)}/${f1(r.gapP99)} streams ${r.timedOk}/${STREAMS_TIMED} ${r.manyOk}/${STREAMS_MANY}${r.manyErrors.length ? ` (${r.manyErrors.join('; ')})` : ''}`)),
      '```',
      '',
    ].join('\n'),
  );
  log(`wrote ${path.relative(ROOT, file)} (${minutes} min)`);
  await writeProfiles();
}

/** With BENCH_CPU_PROF: each API subject writes its profile (SIGUSR2); where its CPU went is printed. */
async function writeProfiles(): Promise<void> {
  for (const p of profiles) {
    fs.mkdirSync(path.dirname(p.file), { recursive: true });
    fs.rmSync(p.file, { force: true });
    process.kill(p.pid, 'SIGUSR2');
    await waitFor(`the profile of ${p.label}`, async () => fs.existsSync(p.file) && fs.statSync(p.file).size > 0, 60_000);
    await new Promise((r) => setTimeout(r, 500));
    log(`CPU profile of ${p.label}: ${p.file}`);
    const summary = spawnSync(process.execPath, ['--import', 'tsx', 'bench/profile-summary.ts', p.file, '20'], { cwd: ROOT, encoding: 'utf8' });
    console.log(summary.stdout || summary.stderr);
  }
}

runBench(main);
