/**
 * `npm run bench:retry-floor`: the least CPU one activity attempt can cost on this machine, the
 * floor under `bench:jobs`' CPU per status check (issue 34). N workflows each run one activity
 * that does nothing but fail with `nextRetryDelay` (BENIGN) M-1 times, then succeed: exactly the
 * Temporal work of a status check riding the retry policy, with none of ours (no database, no
 * provider, no sealing). Measured per retry: the Temporal dev server's CPU (from /proc) and the
 * worker's (this process: the SDK's poll, dispatch, failure and completion). Each variant is a
 * fresh dev server: as `npm start` ran it before issue 34 (SQLite file, rollback journal, full
 * sync), with the write-ahead log, with the Go collector relaxed as `npm start` now runs it, and in
 * memory.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { DEV_SERVER_GO_RUNTIME, DEV_SERVER_SQLITE_PRAGMAS, startTemporalDevServer } from '../../scripts/lib/temporal-dev-server';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';
import { freePort } from '../../scripts/lib/ports';
import { cpuSeconds } from '../lib/proc';
import { f2, sh } from '../lib/report';
import { log, ROOT } from '../lib/processes';

const N = Number(process.env.BENCH_WORKFLOWS ?? 20);
const M = Number(process.env.BENCH_ATTEMPTS ?? 60);
const DELAY_MS = Number(process.env.BENCH_DELAY_MS ?? 60);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

type Variant = { name: string; file: boolean; pragmas: boolean; goRuntime?: Record<string, string> };
const ALL_VARIANTS: Variant[] = [
  { name: 'SQLite file, default journal (npm start before issue 34)', file: true, pragmas: false },
  { name: 'SQLite file, write-ahead log', file: true, pragmas: true },
  { name: 'write-ahead log, GOGC=400 (npm start now)', file: true, pragmas: true, goRuntime: DEV_SERVER_GO_RUNTIME },
  { name: 'write-ahead log, GOGC=off, GOMEMLIMIT=1GiB', file: true, pragmas: true, goRuntime: { GOGC: 'off', GOMEMLIMIT: '1GiB' } },
  { name: 'in memory', file: false, pragmas: false },
];
// BENCH_VARIANTS=1,2: only those rows (indexes into ALL_VARIANTS).
const VARIANTS = process.env.BENCH_VARIANTS ? process.env.BENCH_VARIANTS.split(',').map((i) => ALL_VARIANTS[Number(i)]!) : ALL_VARIANTS;

async function measure(v: Variant): Promise<{ temporal: number; worker: number; idle: number; secs: number }> {
  const db = v.file ? path.join(os.tmpdir(), `retry-floor-${process.pid}-${Date.now()}.sqlite`) : undefined;
  const server = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort(), dbFile: db, preciseTimers: true, sqlitePragmas: v.pragmas ? DEV_SERVER_SQLITE_PRAGMAS : undefined, goRuntime: v.goRuntime });
  const pid = server.process.pid!;
  const connection = await NativeConnection.connect({ address: server.address });
  const worker = await Worker.create({
    connection, taskQueue: 'floor', workflowsPath: path.join(__dirname, 'workflows.ts'),
    activities: {
      async poll(attempts: number) {
        const attempt = Context.current().info.attempt;
        if (attempt < attempts) throw ApplicationFailure.create({ type: 'Running', message: `check ${attempt}`, nextRetryDelay: DELAY_MS, category: ApplicationFailureCategory.BENIGN });
      },
    },
  });
  const running = worker.run();
  const client = new Client({ connection: await Connection.connect({ address: server.address }) });
  try {
    await client.workflow.execute('floor', { taskQueue: 'floor', workflowId: 'warm-up', args: [3] });
    const i0 = cpuSeconds(pid);
    await new Promise((r) => setTimeout(r, 5000));
    const idle = ((cpuSeconds(pid) - i0) * 1000) / 5;
    const t0 = cpuSeconds(pid);
    const w0 = process.cpuUsage();
    const start = Date.now();
    await Promise.all(Array.from({ length: N }, (_, i) => client.workflow.execute('floor', { taskQueue: 'floor', workflowId: `floor-${i}`, args: [M] })));
    const secs = (Date.now() - start) / 1000;
    const w = process.cpuUsage(w0);
    const retries = N * (M - 1);
    return { temporal: ((cpuSeconds(pid) - t0) * 1000 - idle * secs) / retries, worker: (w.user + w.system) / 1000 / retries, idle, secs };
  } finally {
    worker.shutdown();
    await running;
    await client.connection.close();
    await connection.close();
    await server.stop();
    if (db) for (const f of [db, `${db}-wal`, `${db}-shm`]) fs.rmSync(f, { force: true });
  }
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const lines: string[] = [];
  for (const v of VARIANTS) {
    const rounds: Array<Awaited<ReturnType<typeof measure>>> = [];
    for (let r = 0; r < ROUNDS; r++) {
      log(`${v.name}: round ${r + 1} of ${ROUNDS}`);
      rounds.push(await measure(v));
    }
    const med = (k: 'temporal' | 'worker') => rounds.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(rounds.length / 2)]!;
    lines.push(`| ${v.name} | ${f2(med('temporal'))} | ${f2(med('worker'))} | ${f2(med('temporal') + med('worker'))} | ${rounds.map((x) => `${f2(x.temporal)}+${f2(x.worker)}`).join(', ')} |`);
  }
  const day = new Date().toISOString().slice(0, 10);
  const file = path.join(ROOT, 'bench', 'results', `${day}-retry-floor.md`);
  const [load1] = os.loadavg();
  fs.writeFileSync(file, [
    `# The floor under a status check: one activity retry, ${day}`, '',
    `\`npm run bench:retry-floor\` (bench/retry-floor/run.ts): ${N} workflows, each one activity failing with \`nextRetryDelay\` ${DELAY_MS} ms (BENIGN) ${M - 1} times then succeeding; nothing else. CPU per retry, median of ${ROUNDS} rounds (Temporal's idle CPU taken out), each round a fresh dev server with precise timers.`, '',
    '| dev server | Temporal ms/retry | worker ms/retry | together | rounds (Temporal+worker) |', '| --- | ---: | ---: | ---: | --- |', ...lines, '',
    `Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}; Node ${process.version}; ${sh(`${resolveTemporalCli()} --version`)}; load average ${f2(load1!)} at the end.`, '',
  ].join('\n'));
  log(`wrote ${path.relative(ROOT, file)}`);
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
