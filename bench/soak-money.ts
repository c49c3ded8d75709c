/**
 * `npm run soak:money` (issue 54, section 2): the ledger reconciled with the providers' bill
 * after mixed traffic and faults.
 *
 * Parts, each in its own process as production runs them, on services of the soak's own (so
 * it can restart them): an embedded PostgreSQL, a redis-server keeping its data on disk, a
 * Temporal dev server; SOAK_APIS (3) API processes, a jobs and a webhooks worker; the sandbox
 * (in this process) as every provider, keeping its bill (sandbox/bill.ts).
 *
 * Traffic: SOAK_CONCURRENCY (12) clients for SOAK_SECONDS (200) a seed, over three
 * organizations, each with its own provider credential and three keys: a lifetime limit near
 * exhaustion, a monthly one, none. The mix (seeded): chat whole and streamed, reasoning
 * streams left by their client, native and translated Messages with thinking and cache writes,
 * Responses stored and continued, embeddings, images, speech, decisions with deadlines, calls
 * our timeout cuts, failovers off a failing connection, cache hits, video jobs (some canceled).
 *
 * Faults during the load: an API process and the jobs worker SIGKILLed (each started again),
 * Redis restarted with its data, Postgres restarted, Temporal paused for 20 s.
 *
 * Afterwards, per organization: the bill, the ledger, usage rollups, the request log and job
 * costs side by side. It fails on a request the ledger charged less than the bill (lease lapses
 * of killed processes cover requests whose own rows died with them), on a key's bill past its
 * limit by more than the bound in docs/decisions.md, on a request answered but missing from the
 * log or logged twice, on a job with more than one render.
 *
 * SOAK_SEEDS ("1,2,3"); SOAK_RESULTS=1 writes the table to bench/results/<date>-money-soak.md.
 * The short run in `npm test` (test/soak/money-soak.test.ts): SOAK_SECONDS=35 SOAK_SEEDS=1.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { newKeyring } from '../core/crypto/sealing';
import { applyMigrations } from '../core/db/migrate';
import { startEmbeddedPostgres, startRedisServer, type LocalService } from '../scripts/lib/local-services';
import { freePort } from '../scripts/lib/ports';
import { resolveTemporalCli } from '../scripts/lib/temporal-cli';
import { startTemporalDevServer, type DevServer } from '../scripts/lib/temporal-dev-server';
import { startSandbox, type Sandbox } from '../sandbox/server';
import { gatewayEnv, manage, newOrganization, startApi, type StartedApi } from './lib/gateway';
import { builtEntry, cleanups, log, node, ROOT, runBench, stopChild, workDir } from './lib/processes';
import type { Services } from './lib/services';
import { soakPlan, type Op } from './soak-money/traffic';
import { reconcile, type Finding, type OrgReport } from './soak-money/reconcile';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 200);
const SEEDS = (process.env.SOAK_SEEDS ?? '1,2,3').split(',').map(Number);
const API_COUNT = Math.max(3, Number(process.env.SOAK_APIS ?? 3));
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 12);
/** How long Temporal is paused (the issue's 20 s). */
const TEMPORAL_PAUSE_MS = 20_000;
/** A killed process is started again this long after. */
const RESTART_AFTER_MS = 3_000;
const ORGS = 3;
/** Which faults to inject (SOAK_FAULTS, default all): api, worker, redis, postgres, temporal; `none` for a run without. */
const FAULTS = new Set((process.env.SOAK_FAULTS ?? 'api,worker,redis,postgres,temporal').split(','));

/** The soak's own services: each can be stopped and started again on its port and data. */
async function ownServices(work: string) {
  const pgPort = await freePort();
  const pgDir = path.join(work, 'postgres');
  let pg: LocalService = await startEmbeddedPostgres(pgDir, pgPort);
  const redisPort = await freePort();
  const redisDir = path.join(work, 'redis');
  let redis: LocalService = await startRedisServer(redisPort, redisDir);
  const temporal: DevServer = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort() });
  cleanups.push(() => temporal.stop(), () => redis.stop(), () => pg.stop());
  const svc: Services = { databaseUrl: pg.url, redisUrl: redis.url, temporalAddress: temporal.address, postgresPid: null, redisPid: null, source: 'the soak\'s own', ownTemporal: true };
  return {
    svc,
    async restartPostgres() {
      await pg.stop();
      pg = await startEmbeddedPostgres(pgDir, pgPort);
    },
    async restartRedis() {
      // SIGTERM: Redis writes its data (save points are set) and exits; it loads them again.
      await redis.stop();
      redis = await startRedisServer(redisPort, redisDir);
    },
    async pauseTemporal(ms: number) {
      temporal.process.kill('SIGSTOP');
      await sleep(ms);
      temporal.process.kill('SIGCONT');
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const soakStarted = Date.now();
/** A progress line with the time since the soak started. */
const step = (what: string) => log(`${((Date.now() - soakStarted) / 1000).toFixed(1)} s: ${what}`);

/** An organization connected to the sandbox under its own credential, with its keys. */
export type SoakOrg = { orgId: string; token: string; secret: string; keys: Array<{ id: string; secret: string; limit: number | null; period: string | null }>; decision: string; route: string };

async function setUpOrg(apiUrl: string, svc: Services, sandbox: Sandbox, seed: number, index: number): Promise<SoakOrg> {
  const { orgId, token } = await newOrganization(svc, `soak s${seed} o${index} ${Date.now()}`);
  const secret = `sk-sandbox-soak-s${seed}-o${index}-${Date.now().toString(36)}`;
  const connect = (kind: string, base: string, extra: Record<string, unknown> = {}) =>
    manage(apiUrl, token, 'POST', '/provider_connections', { kind, name: `${kind} ${base} ${Math.random().toString(36).slice(2, 8)}`, secret, config: { base_url: `${sandbox.url}/${base}` }, ...extra });
  // Our timeout cuts a call the sandbox holds for longer (the `slow` ops).
  const openai = await connect('openai', 'openai/v1', { timeout_ms: 1500 });
  await connect('anthropic', 'anthropic/v1');
  await connect('google', 'google/v1beta');
  // A connection that fails every call: a route tries it first, then fails over.
  const failing = await connect('openai', 'x/status=500/openai/v1', { pool_role: 'standby' });
  const route = `flaky-${index}`;
  await manage(apiUrl, token, 'POST', '/routes', { slug: route, targets: [{ connection_id: failing.id, model: 'gpt-4o-mini' }, { connection_id: openai.id, model: 'gpt-4o-mini' }], max_retries: 0 });
  const decision = `triage-${index}`;
  await manage(apiUrl, token, 'POST', '/decision_policies', {
    slug: decision, model: 'openai/gpt-4o-mini', instructions: 'Route the ticket.', deadline_ms: 1000, fallback: { queue: 'general' },
    output_schema: { type: 'object', properties: { queue: { type: 'string' } }, required: ['queue'], additionalProperties: false },
  });
  // Prompt logging keeps stored responses (`previous_response_id` continues them); one organization caches answers.
  const settings = await manage(apiUrl, token, 'GET', '/org_settings');
  await manage(apiUrl, token, 'PATCH', '/org_settings', { prompt_logging_enabled: true, ...(index === 0 && { response_cache: { enabled: true, default_ttl_seconds: 3600 } }) }, settings.etag as string);
  const project = await manage(apiUrl, token, 'POST', '/projects', { name: 'soak' });
  const keys: SoakOrg['keys'] = [];
  for (const [limit, period] of [[0.02, 'never'], [2, 'monthly'], [null, null]] as const) {
    const key = await manage(apiUrl, token, 'POST', '/gateway_keys', {
      label: `soak ${limit ?? 'unlimited'}`, project_id: project.id, rate_limit_rpm: 50000,
      ...(limit !== null && { credit_limit: { amount: limit, period } }),
    });
    keys.push({ id: key.id as string, secret: key.secret as string, limit, period });
  }
  return { orgId, token, secret, keys, decision, route };
}

/** What the client saw of one request. */
/** What the client saw of one request: its id and status once the headers came, `broken` when the answer then broke off (a killed process). */
export type Sent = { op: string; org: number; key: number; api: number; pid: number; requestId: string | null; status: number | null; hungUp: boolean; broken?: boolean; jobId?: string; tag: string };

async function runSeed(seed: number, work: string, services: Awaited<ReturnType<typeof ownServices>>, sandbox: Sandbox, sealingKeys: string): Promise<{ reports: OrgReport[]; findings: Finding[]; sent: Sent[]; faults: string[] }> {
  const { svc } = services;
  const apis: Array<StartedApi | null> = [];
  for (let i = 0; i < API_COUNT; i++) apis.push(await startApi(work, `s${seed}-api${i}`, `API ${i}`, svc, sealingKeys));
  const worker = (name: 'jobs' | 'webhooks', n: number) => node([builtEntry(`workers/${name}`)], gatewayEnv(work, `s${seed}-${name}${n}`, svc, sealingKeys), path.join(work, `s${seed}-${name}${n}.log`));
  let jobsWorker = worker('jobs', 0);
  const webhooksWorker = worker('webhooks', 0);

  step(`seed ${seed}: ${API_COUNT} API processes and the workers started`);
  const orgs: SoakOrg[] = [];
  for (let i = 0; i < ORGS; i++) orgs.push(await setUpOrg(apis[0]!.apiUrl, svc, sandbox, seed, i));
  // Configuration reaches every API process through its own refresh.
  await sleep(1500);
  step(`seed ${seed}: organizations set up; traffic for ${SECONDS} s`);

  const plan = soakPlan(seed);
  const sent: Sent[] = [];
  const faults: string[] = [];
  const killedPids = new Set<number>();
  const killedAt: number[] = [];
  const started = Date.now();
  const deadline = started + SECONDS * 1000;
  const at = (fraction: number) => started + SECONDS * 1000 * fraction;
  const live = () => apis.map((a, i) => (a ? i : -1)).filter((i) => i >= 0);

  const faultPlan: Array<[number, string, () => Promise<void>, string]> = [
    [0.15, 'SIGKILL API 0 (started again 3 s later)', async () => {
      const victim = apis[0]!;
      apis[0] = null;
      killedPids.add(victim.pid);
      killedAt.push(Date.now());
      victim.child.kill('SIGKILL');
      await sleep(RESTART_AFTER_MS);
      // On the same data folder, as a restarted process: it inserts what its predecessor's journals hold.
      apis[0] = await startApi(work, `s${seed}-api0`, 'API 0 again', svc, sealingKeys);
    }, 'api'],
    [0.25, 'SIGKILL the jobs worker (started again 3 s later)', async () => {
      jobsWorker.kill('SIGKILL');
      await sleep(RESTART_AFTER_MS);
      jobsWorker = worker('jobs', 1);
    }, 'worker'],
    [0.4, 'Redis restarted with its data', () => services.restartRedis(), 'redis'],
    [0.55, 'Postgres restarted', () => services.restartPostgres(), 'postgres'],
    [0.65, `Temporal paused ${TEMPORAL_PAUSE_MS / 1000} s`, () => services.pauseTemporal(TEMPORAL_PAUSE_MS), 'temporal'],
  ];
  const faultsDone = (async () => {
    for (const [fraction, what, act, name] of faultPlan) {
      if (!FAULTS.has(name)) continue;
      await sleep(Math.max(0, at(fraction) - Date.now()));
      const t0 = Date.now();
      await act();
      faults.push(`${((t0 - started) / 1000).toFixed(1)} s: ${what} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      step(`seed ${seed}: ${what}`);
    }
  })();

  let opIndex = 0;
  const clients = Array.from({ length: CONCURRENCY }, async () => {
    while (Date.now() < deadline) {
      const op: Op = plan.next(opIndex++);
      const choices = live();
      const api = choices[op.pick(choices.length)]!;
      const target = apis[api];
      if (!target) continue;
      const org = orgs[op.org % orgs.length]!;
      const record: Sent = { op: op.name, org: op.org % orgs.length, key: op.key, api, pid: target.pid, requestId: null, status: null, hungUp: false, tag: `s${seed}n${opIndex}` };
      sent.push(record);
      const also = (name: string) => {
        const more: Sent = { ...record, op: name, requestId: null, status: null, hungUp: false, tag: `${record.tag}b` };
        sent.push(more);
        return more;
      };
      try {
        await op.run({ apiUrl: target.apiUrl, org, key: org.keys[op.key]!.secret, record, also });
      } catch {
        // A process killed under the request, a connection refused: the client saw no answer.
      }
    }
  });
  await Promise.all([...clients, faultsDone]);
  step(`seed ${seed}: ${sent.length} requests sent; draining`);

  // Drain: jobs to their end, lapsed leases past their TTL and swept (a request on each key
  // makes its reservation see them), then every process stopped gracefully (batches flushed).
  const answering = live().map((i) => apis[i]!);
  await plan.drain({ apiUrl: answering[0]!.apiUrl, orgs, sent });
  await sleep(4_000);
  for (const org of orgs) for (const k of org.keys) await fetch(`${answering[0]!.apiUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${k.secret}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-4o-mini', max_tokens: 5, messages: [{ role: 'user', content: 'sweep' }] }) }).then((r) => r.text()).catch(() => undefined);
  await sleep(1_000);
  await Promise.all([...answering.map((a) => stopChild(a.child)), stopChild(jobsWorker), stopChild(webhooksWorker)]);

  step(`seed ${seed}: drained; every process stopped`);
  const pg = new PgClient({ connectionString: svc.databaseUrl });
  await pg.connect();
  try {
    const { reports, findings } = await reconcile(pg, sandbox, orgs, sent, { pids: killedPids, at: killedAt });
    return { reports, findings, sent, faults };
  } finally {
    await pg.end();
  }
}

function table(seed: number, reports: OrgReport[]): string[] {
  const usd = (n: number) => `$${n.toFixed(6)}`;
  return [
    `| seed ${seed} | requests (answered) | bill | ledger | under-charge | over-charge | lease lapses | usage rollups | request log cost | job costs | log rows missing / twice | jobs with >1 render | limited key: bill / limit + bound |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...reports.map((r) => `| org ${r.org} | ${r.requests} (${r.answered}) | ${usd(r.billed)} | ${usd(r.ledger)} | ${usd(r.underCharge)} | ${usd(r.overCharge)} | ${usd(r.leaseLapses)} | ${usd(r.usage)} | ${usd(r.loggedCost)} | ${usd(r.jobCosts)} | ${r.logMissing} / ${r.logTwice} | ${r.multiRenderJobs} | ${usd(r.limitedKeyBill)} / ${usd(r.limitedKeyLimit)} + ${usd(r.limitBound)} |`),
  ];
}

async function main(): Promise<void> {
  const work = workDir();
  log(`money soak: ${SEEDS.length} seed(s) of ${SECONDS} s, ${API_COUNT} API processes, ${CONCURRENCY} clients`);
  const services = await ownServices(work);
  await applyMigrations(services.svc.databaseUrl);
  step('services started, migrations applied');
  const sandbox = await startSandbox();
  cleanups.push(() => sandbox.close());
  const sealingKeys = newKeyring();
  const lines: string[] = [];
  const allFindings: Array<Finding & { seed: number }> = [];
  const t0 = Date.now();
  for (const seed of SEEDS) {
    const { reports, findings, sent, faults } = await runSeed(seed, work, services, sandbox, sealingKeys);
    lines.push(...table(seed, reports), '', `Faults: ${faults.join('; ')}. Requests by kind: ${Object.entries(countBy(sent.map((s) => s.op))).map(([k, n]) => `${k} ${n}`).join(', ')}.`, '');
    for (const f of findings) allFindings.push({ ...f, seed });
    for (const l of table(seed, reports)) console.log(l);
  }
  const summary = { ok: allFindings.length === 0, seeds: SEEDS, seconds: SECONDS, findings: allFindings.slice(0, 50), findingCount: allFindings.length };
  console.log(`SOAK_SUMMARY ${JSON.stringify(summary)}`);
  if (process.env.SOAK_RESULTS === '1') {
    const file = path.join(ROOT, 'bench', 'results', `${new Date().toISOString().slice(0, 10)}-money-soak.md`);
    fs.writeFileSync(file, [
      `# Money soak, ${new Date().toISOString().slice(0, 10)}`, '',
      `\`npm run soak:money\` (bench/soak-money.ts), ${((Date.now() - t0) / 60000).toFixed(1)} minutes: seeds ${SEEDS.join(', ')}, ${SECONDS} s of traffic each, ${API_COUNT} API processes, ${CONCURRENCY} clients. Amounts in USD at the providers' list prices.`, '',
      ...lines,
      `Result: ${summary.ok ? 'every check held' : `${allFindings.length} finding(s)`}.`, '',
      ...allFindings.slice(0, 50).map((f) => `- seed ${f.seed}, org ${f.org}: ${f.check}: ${f.detail}`),
    ].join('\n') + '\n');
    log(`wrote ${path.relative(ROOT, file)}`);
  }
  if (!summary.ok) {
    for (const f of allFindings.slice(0, 20)) console.error(`[soak] seed ${f.seed}, org ${f.org}: ${f.check}: ${f.detail}`);
    throw new Error(`${allFindings.length} finding(s); see above`);
  }
}

function countBy(items: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[i] = (out[i] ?? 0) + 1;
  return out;
}

runBench(main);
