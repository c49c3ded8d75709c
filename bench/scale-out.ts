/**
 * `npm run bench:scale-out` (issue 37): several API processes behind one Postgres and one Redis.
 *
 * 1. Throughput. 1, 2 and 4 API processes (BENCH_SCALE_PROCESSES, "1,2,4"), each started as
 *    production starts it, one organization set up as side-by-side's `gateway` subject (8 keys,
 *    50 000 rpm, a 1 000 000 USD credit limit). c=32 in all, split evenly: one wrk a process, all
 *    at once, BENCH_SECONDS (5) a run, BENCH_ROUNDS (3) rounds with the process counts
 *    interleaved. Per run: aggregate req/s, the API processes' CPU a request (together), and
 *    Postgres and Redis CPU a request.
 * 2. The spend ceiling under that load. After the rounds, for 2 and 4 processes: a new project
 *    with a blocking monthly limit that the load passes within about a second, its 8 keys sent in
 *    turn by every process's wrk. Once the runs' rows have landed: the ledger's settled total
 *    for the project is at most the limit; it equals the cost of the request-log rows answered
 *    200 or cut when wrk stopped (499, billed), one ledger row each (wrk's own count of 200
 *    answers misses those still in flight when it stops); the other answers are refusals (402).
 *
 * Services as side-by-side finds or starts them (bench/lib/services.ts). See bench/README.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { newKeyring } from '../core/crypto/sealing';
import { applyMigrations } from '../core/db/migrate';
import { capCpu } from './lib/cpu-cap';
import { chatBody, manage, newOrganization, startApi, startMock, tenant, type StartedApi } from './lib/gateway';
import { findLoadTool, type LoadResult, type LoadTool } from './lib/load';
import { cpuSeconds, rssMb } from './lib/proc';
import { cleanups, log, runBench, workDir } from './lib/processes';
import { f0, f2, machineLines, median } from './lib/report';
import { services, servicesCpu, type Services } from './lib/services';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const PROCESS_COUNTS = (process.env.BENCH_SCALE_PROCESSES ?? '1,2,4').split(',').map(Number);
const CONNECTIONS = 32;
/**
 * Cores each API process may use (BENCH_SCALE_CPU, e.g. 0.2; unset: no cap). Capped, the
 * processes stand for API processes on machines of their own (bench/lib/cpu-cap.ts), so the
 * counts compare what one Redis and one Postgres let them serve, not how two cores are shared.
 */
const CPU_CAP = process.env.BENCH_SCALE_CPU ? Number(process.env.BENCH_SCALE_CPU) : null;
/** Unheld load on every process at once before they are held (BENCH_SCALE_CPU). */
const CAP_WARM_S = 15;
/** Unmeasured load before each measured run, so no process is measured waking up. */
const WARM_UP_S = 2;
/** The ceiling runs' project limit, in dollars: the load passes it within about a second. */
const CEILING_LIMIT_USD = 0.5;
/** How long the ceiling check waits for the API processes' batch writers to land their rows. */
const LAND_MS = 3000;

type Run = { processes: number; round: number; rps: number; requests: number; errors: number; apiCpuUs: number; svcCpuUs: number; loads: LoadResult[] };
type Ceiling = {
  processes: number; limit: number; answered200: number; other: number; statuses: string; ledgerTotal: number; ledgerRows: number; loggedCost: number; loggedRows: number; kinds: string;
};

/** One wrk a process, all at once, c=32 split evenly; the API processes' and the services' CPU over the run. */
async function loadAll(tool: LoadTool, apis: StartedApi[], bearers: string[], seconds: number, work: string, svc: Services): Promise<Omit<Run, 'processes' | 'round'>> {
  const cpu0 = apis.map((a) => cpuSeconds(a.pid));
  const svc0 = servicesCpu(svc);
  const loads = await Promise.all(apis.map((api) => tool.run({
    url: `${api.apiUrl}/v1/chat/completions`, headers: { 'content-type': 'application/json' }, bearers,
    body: chatBody('openai/gpt-4o-mini'), connections: CONNECTIONS / apis.length, seconds,
  }, work)));
  const apiCpu = apis.reduce((sum, a, i) => sum + cpuSeconds(a.pid) - cpu0[i]!, 0);
  const requests = loads.reduce((n, l) => n + l.requests, 0);
  return {
    rps: loads.reduce((n, l) => n + l.rps, 0),
    requests,
    errors: loads.reduce((n, l) => n + l.errors, 0),
    apiCpuUs: (apiCpu / Math.max(1, requests)) * 1e6,
    svcCpuUs: ((servicesCpu(svc) - svc0) / Math.max(1, requests)) * 1e6,
    loads,
  };
}

/** A project with a blocking monthly limit and 8 keys of it (50 000 rpm each, no limit of their own). */
async function limitedProject(apiUrl: string, token: string, limit: number): Promise<{ projectId: string; keys: string[] }> {
  const project = await manage(apiUrl, token, 'POST', '/projects', { name: `ceiling ${Date.now()}`, spend_limit: { monthly: limit, behavior: 'block' } });
  const keys: string[] = [];
  for (let i = 0; i < 8; i++) {
    const key = await manage(apiUrl, token, 'POST', '/gateway_keys', { label: `ceiling ${i}`, project_id: project.id, rate_limit_rpm: 50000 });
    keys.push(key.secret as string);
  }
  return { projectId: project.id as string, keys };
}

async function ceilingRun(tool: LoadTool, apis: StartedApi[], token: string, work: string, svc: Services, pg: PgClient): Promise<Ceiling> {
  const { projectId, keys } = await limitedProject(apis[0]!.apiUrl, token, CEILING_LIMIT_USD);
  const run = await loadAll(tool, apis, keys, SECONDS, work, svc);
  await new Promise((r) => setTimeout(r, LAND_MS));
  const ledger = await pg.query<{ total: string | null; n: string }>(`select sum(amount) as total, count(*) as n from spend_ledger where project_id = $1 and state = 'settled'`, [projectId]);
  const logged = await pg.query<{ cost: string | null; n: string }>(`select sum(cost) as cost, count(*) as n from request_logs where project_id = $1 and cost is not null`, [projectId]);
  // The ledger's rows by kind, and each request's row against its request-log row.
  const kinds = await pg.query<{ kind: string; n: string; total: string }>(`
    select case when l.request_id like 'lease:%' then 'lease lapse' when r.id is null then 'no request-log row' when l.amount = r.cost then 'request, as logged'
      else 'request, amount differs from the log' end as kind, count(*) as n, sum(l.amount)::text as total
    from spend_ledger l left join request_logs r on r.id = l.request_id
    where l.project_id = $1 and l.state = 'settled' group by 1 order by 1`, [projectId]);
  const answered200 = run.requests - run.errors;
  const samples = run.loads.map((l) => l.errorSample ?? '').join(' ');
  const statuses = [...new Set([...samples.matchAll(/(\d{3}) /g)].map((m) => m[1]!))].join(', ');
  return {
    processes: apis.length, limit: CEILING_LIMIT_USD, answered200, other: run.errors, statuses,
    ledgerTotal: Number(ledger.rows[0]!.total ?? 0), ledgerRows: Number(ledger.rows[0]!.n), loggedCost: Number(logged.rows[0]!.cost ?? 0), loggedRows: Number(logged.rows[0]!.n),
    kinds: kinds.rows.map((k) => `${k.kind}: ${k.n} rows, ${Number(k.total).toFixed(6)} USD`).join('; '),
  };
}

function report(runs: Run[], ceilings: Ceiling[]): { text: string; verdicts: string[] } {
  const counts = [...new Set(runs.map((r) => r.processes))];
  const m = (n: number, f: (r: Run) => number) => median(runs.filter((r) => r.processes === n).map(f));
  const one = counts.includes(1) ? m(1, (r) => r.rps) : NaN;
  const rows: Array<[string, (n: number) => string]> = [
    ['req/s, c=32 in all', (n) => f0(m(n, (r) => r.rps))],
    ['x one process', (n) => f2(m(n, (r) => r.rps) / one)],
    ['x one process, per process (1.00: linear)', (n) => f2(m(n, (r) => r.rps) / one / n)],
    ['API CPU µs/req (all processes)', (n) => f0(m(n, (r) => r.apiCpuUs))],
    ['Postgres+Redis CPU µs/req', (n) => f0(m(n, (r) => r.svcCpuUs))],
    ['errors (all rounds)', (n) => f0(runs.filter((r) => r.processes === n).reduce((a, r) => a + r.errors, 0))],
  ];
  const table = [
    `| | ${counts.map((n) => `${n} API process${n > 1 ? 'es' : ''}`).join(' | ')} |`,
    `|---|${counts.map(() => '---:').join('|')}|`,
    ...rows.map(([label, f]) => `| ${label} | ${counts.map(f).join(' | ')} |`),
  ];
  const verdicts: string[] = [];
  for (const n of counts.filter((c) => c > 1)) {
    const x = m(n, (r) => r.rps) / one;
    verdicts.push(`- ${x > 1.05 ? 'scales' : '**does not scale**'}: ${n} processes ${f2(x)}x one process's throughput`);
  }
  const ceilingLines = ceilings.map((c) => {
    const held = c.ledgerTotal <= c.limit + 1e-9;
    // Server-side, both: wrk stops counting with requests still in flight, which the gateway answers and logs.
    const exact = Math.abs(c.ledgerTotal - c.loggedCost) < 1e-9 && c.ledgerRows === c.loggedRows;
    verdicts.push(`- ${held ? 'held' : '**broken**'}: ${c.processes} processes, settled ${c.ledgerTotal.toFixed(6)} of a ${c.limit} USD limit${exact ? ', exactly the answered requests\' cost' : ' (**ledger and answers differ**)'}`);
    return `${c.processes} processes: ${c.answered200} answered 200, ${c.other} refused (${c.statuses || 'no sample'}); ledger settled ${c.ledgerTotal.toFixed(6)} USD in ${c.ledgerRows} rows; request log ${c.loggedRows} rows with a cost (a call cut when wrk stopped is logged 499, and billed) costing ${c.loggedCost.toFixed(6)} USD; limit ${c.limit} USD, left unspent ${(c.limit - c.ledgerTotal).toFixed(6)}\n  ledger rows: ${c.kinds}`;
  });
  return { text: [...table, '', '## The spend ceiling under load', '', '```', ...ceilingLines, '```'].join('\n'), verdicts };
}

async function main(): Promise<void> {
  const startedAt = Date.now();
  if (CPU_CAP !== null && !(CPU_CAP > 0)) throw new Error(`BENCH_SCALE_CPU must be a positive number of cores, not ${process.env.BENCH_SCALE_CPU}`);
  const load0 = os.loadavg();
  const tool = findLoadTool();
  if (!tool) throw new Error('no load generator: install wrk (apt-get install -y wrk)');
  const work = workDir();
  const svc = await services(work);
  log(`services: ${svc.source}`);
  await applyMigrations(svc.databaseUrl);
  const sealingKeys = newKeyring();
  const mockUrl = await startMock(work);
  const most = Math.max(...PROCESS_COUNTS);
  const apis: StartedApi[] = [];
  for (let i = 0; i < most; i++) apis.push(await startApi(work, `api${i}`, `API ${i}`, svc, sealingKeys));
  log(`API pids ${apis.map((a) => a.pid).join(', ')}`);
  const org = await newOrganization(svc, `bench scale-out ${new Date().toISOString()}`);
  const keys = await tenant(apis[0]!.apiUrl, org.token, mockUrl, { promptLogging: false });
  if (CPU_CAP !== null) {
    // Warmed before they are held: a process held to a fifth of a core from its start was still
    // compiling its hot code in its first measured run (the compiler's threads share the hold):
    // 100 req/s at 2,004 µs of CPU a request.
    log(`warming the ${apis.length} API processes, ${CAP_WARM_S} s at once, before holding them`);
    await loadAll(tool, apis, keys, CAP_WARM_S, work, svc);
    apis.forEach((a, i) => cleanups.push(capCpu(a.pid, CPU_CAP, `gw-bench-${process.pid}-api${i}`)));
    log(`each API process held to ${CPU_CAP} of a core (BENCH_SCALE_CPU)`);
  }
  const runs: Run[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    // The starting count rotates each round.
    const order = PROCESS_COUNTS.map((_, i) => PROCESS_COUNTS[(i + round - 1) % PROCESS_COUNTS.length]!);
    for (const n of order) {
      await loadAll(tool, apis.slice(0, n), keys, WARM_UP_S, work, svc);
      const run = { processes: n, round, ...(await loadAll(tool, apis.slice(0, n), keys, SECONDS, work, svc)) };
      runs.push(run);
      log(`round ${round}, ${n} process(es): ${f0(run.rps)} req/s, API CPU ${f0(run.apiCpuUs)} µs/req, services ${f0(run.svcCpuUs)} µs/req, errors ${run.errors}`);
    }
  }
  const pg = new PgClient({ connectionString: svc.databaseUrl });
  await pg.connect();
  const ceilings: Ceiling[] = [];
  try {
    for (const n of PROCESS_COUNTS.filter((c) => c > 1)) {
      const c = await ceilingRun(tool, apis.slice(0, n), org.token, work, svc, pg);
      ceilings.push(c);
      log(`ceiling, ${n} processes: settled ${c.ledgerTotal.toFixed(6)} of ${c.limit} USD; ${c.answered200} answered 200, ${c.other} refused`);
    }
  } finally {
    await pg.end();
  }
  const rss = apis.map((a) => f0(rssMb(a.pid))).join(', ');
  const { text, verdicts } = report(runs, ceilings);
  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  console.log(`\n${text}\n\n${verdicts.join('\n')}\n`);
  const date = new Date().toISOString().slice(0, 10);
  const file = path.join(__dirname, 'results', `${date}-scale-out${CPU_CAP === null ? '' : '-capped'}.md`);
  fs.writeFileSync(file, [
    `# Several API processes behind one Postgres and one Redis, ${date}`,
    '',
    `\`npm run bench:scale-out\` (bench/scale-out.ts), ${minutes} minutes. API processes started as production starts them, one organization as side-by-side's \`gateway\` subject ` +
      `(8 keys with the 50 000 rpm tier and a 1 000 000 USD credit limit, request log on); c=${CONNECTIONS} in all, split evenly over the processes, one wrk each, non-streaming chat against bench/mock-upstream.ts; ` +
      `medians of ${ROUNDS} rounds, ${SECONDS} s a run, the process counts interleaved.` +
      (CPU_CAP === null ? '' : ` Each API process held to ${CPU_CAP} of a core by a cgroup of its own (\`BENCH_SCALE_CPU=${CPU_CAP}\`, bench/lib/cpu-cap.ts): each stands for an API process with a machine of its own.`),
    '',
    text,
    '',
    '## Verdicts',
    '',
    ...verdicts,
    '',
    '## Machine and run',
    '',
    ...machineLines(tool, svc, load0),
    `- RSS of the API processes at the end: ${rss} MB`,
    '',
    '## Per round',
    '',
    '```',
    ...runs.map((r) => `${r.processes} process(es), round ${r.round}: ${f0(r.rps)} req/s (${r.loads.map((l) => f0(l.rps)).join(' + ')}), API CPU ${f0(r.apiCpuUs)} µs/req, Postgres+Redis ${f0(r.svcCpuUs)} µs/req, errors ${r.errors}`),
    '```',
    '',
  ].join('\n'));
  log(`wrote ${path.relative(path.join(__dirname, '..'), file)} (${minutes} min)`);
}

runBench(main);
