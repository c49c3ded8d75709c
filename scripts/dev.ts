/**
 * `npm start`: the whole product on one machine. Uses each service named in the environment and
 * starts what is missing: a Temporal dev server (Web UI on 8233), an embedded PostgreSQL, a
 * redis-server, a mail catcher for alert emails (web inbox on 1080) when SMTP_URL is unset. Then migrations, a demo organization on an empty database, the API and every
 * worker. Ctrl-C stops everything it started; data stays under GW_DATA_DIR for the next start.
 */
import type { DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import fs from 'node:fs';
import path from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import { count } from 'drizzle-orm';
import { createApp } from '../api/app';
import { listen } from '../api/listen';
import { startApiRuntime } from '../api/runtime';
import { ConfigError, loadConfig, type Config } from '../core/config';
import { newKeyring } from '../core/crypto/sealing';
import { connectDatabase } from '../core/db/client';
import { applyMigrations } from '../core/db/migrate';
import { organizations } from '../core/db/schema';
import { createLogger } from '../core/logger';
import { connectRedis } from '../core/redis';
import { bootstrapOrganization } from '../core/tenancy/organizations';
import { TASK_QUEUES, taskQueue, type TaskQueueName } from '../workflows/definitions';
import { queueWorkerDeps, startQueueWorkers } from '../workers/queues';
import { installTemporalRuntime } from '../workers/temporal';
import { SANDBOX_SECRET_PREFIX, startSandbox } from '../sandbox/server';
import { DataDirLockedError, lockDataDir, type DataDirLock } from './lib/data-dir-lock';
import { startEmbeddedPostgres, startRedisServer } from './lib/local-services';
import { startMailCatcher } from './lib/mail-catcher';
import { prometheusBinary, startPrometheus } from './lib/prometheus';
import { jaegerBinary, startJaeger } from './lib/jaeger';
import { configuredExporters, startTracing } from '../core/observability/tracing';
import { startConfiguredOpsServer, temporalMetricsAddress } from '../core/observability/metrics';
import { freePort, preferredPort } from './lib/ports';
import { developmentSealingKeysFile, removeRuntimeFile, writeRuntimeFile } from './lib/runtime-file';
import { resolveTemporalCli } from './lib/temporal-cli';
import { DEV_SERVER_GO_RUNTIME, DEV_SERVER_SQLITE_PRAGMAS, startTemporalDevServer } from './lib/temporal-dev-server';

const say = (what: string, detail: string) => console.log(`[gw] ${what.padEnd(12)} ${detail}`);
const stops: Array<[string, () => Promise<void>]> = [];
/** Held from start to exit: one launcher per GW_DATA_DIR (a second refuses, naming this pid). */
let dataDirLock: DataDirLock | null = null;

async function startServices(config: Config) {
  fs.mkdirSync(config.dataDir, { recursive: true });
  // An embedded PostgreSQL run for root runs as the `postgres` user, which must reach its folder.
  if (process.getuid?.() === 0) fs.chmodSync(config.dataDir, 0o755);

  let databaseUrl = config.DATABASE_URL;
  if (databaseUrl) {
    say('Postgres', `${redact(databaseUrl)} (DATABASE_URL)`);
  } else {
    say('Postgres', 'starting embedded PostgreSQL...');
    const pg = await startEmbeddedPostgres(path.join(config.dataDir, 'postgres'), await preferredPort(54329));
    stops.push(['Postgres', pg.stop]);
    databaseUrl = pg.url;
    say('Postgres', `${redact(databaseUrl)} (embedded, data in ${path.join(config.dataDir, 'postgres')})`);
  }

  let redisUrl = config.REDIS_URL;
  if (redisUrl) {
    say('Redis', `${redact(redisUrl)} (REDIS_URL)`);
  } else {
    const redis = await startRedisServer(await freePort(), path.join(config.dataDir, 'redis'));
    stops.push(['Redis', redis.stop]);
    redisUrl = redis.url;
    say('Redis', `${redisUrl} (redis-server started here)`);
  }

  let temporalAddress = config.TEMPORAL_ADDRESS;
  let temporalUi: string | null = null;
  if (temporalAddress) {
    say('Temporal', `${temporalAddress} (TEMPORAL_ADDRESS)`);
  } else {
    const cliPath = resolveTemporalCli();
    const uiPort = await preferredPort(Number(process.env.TEMPORAL_UI_PORT ?? 8233));
    say('Temporal', 'starting the Temporal dev server...');
    const server = await startTemporalDevServer({
      cliPath,
      port: await preferredPort(Number(process.env.TEMPORAL_PORT ?? 7233)),
      uiPort,
      dbFile: path.join(config.dataDir, 'temporal.sqlite'),
      namespace: config.TEMPORAL_NAMESPACE,
      preciseTimers: true,
      sqlitePragmas: DEV_SERVER_SQLITE_PRAGMAS,
      goRuntime: DEV_SERVER_GO_RUNTIME,
      // The UI shows sealed payloads through the API's codec endpoint, once the operator signs in there.
      uiCodecEndpoint: `http://localhost:${config.PORT}/temporal-codec`,
    });
    stops.push(['Temporal', server.stop]);
    temporalAddress = server.address;
    temporalUi = `http://localhost:${uiPort}`;
    say('Temporal', `${temporalAddress} (dev server, state in ${path.join(config.dataDir, 'temporal.sqlite')})`);
  }
  return { databaseUrl, redisUrl, temporalAddress, temporalUi };
}

/**
 * Sealed fields need a master key. For development one is generated once and kept beside the
 * data it protects; production sets GW_SEALING_KEYS from its secret store.
 */
function developmentSealingKeys(dataDir: string): string {
  const file = developmentSealingKeysFile(dataDir);
  if (!fs.existsSync(file)) {
    fs.writeFileSync(file, newKeyring(), { mode: 0o600 });
    say('Sealing key', `generated ${file} (development only; set GW_SEALING_KEYS in production)`);
  }
  return fs.readFileSync(file, 'utf8').trim();
}

/** Where the launcher keeps the demo organization's id, the operator's own (GW_OPERATOR_ORG_ID) on this machine. */
const operatorOrgFile = (dataDir: string) => path.join(dataDir, 'operator-org');

function developmentOperatorOrg(dataDir: string): string | undefined {
  const file = operatorOrgFile(dataDir);
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() || undefined : undefined;
}

/** On an empty database: a demo organization, its token printed once. */
async function bootstrapDemoOrganization(databaseUrl: string, dataDir: string): Promise<string | null> {
  const database = connectDatabase(databaseUrl, { max: 1 });
  try {
    const [row] = await database.db.select({ n: count() }).from(organizations);
    if ((row?.n ?? 0) > 0) return null;
    const demo = await bootstrapOrganization(database.db, { name: 'Demo', plan: 'business' });
    // On this machine the demo organization is the operator's: its tokens see Temporal UI links.
    fs.writeFileSync(operatorOrgFile(dataDir), `${demo.org_id}\n`);
    say('Demo org', `${demo.org_id}; management token (shown once, keep it): ${demo.management_token}`);
    return demo.management_token;
  } finally {
    await database.close();
  }
}

/**
 * The API's metrics on its ops port, and a Prometheus scraping it and the Temporal SDK's metrics
 * when this machine has one (Debian's `prometheus`, which `npm test` installs; PROMETHEUS_PATH).
 */
/** Where a local Prometheus reaches a port listening on `host`: loopback for every-interface listeners, an IPv6 host in brackets. */
function scrapeHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

async function startMetrics(runtime: Awaited<ReturnType<typeof startApiRuntime>>, config: ReturnType<typeof loadConfig>): Promise<void> {
  const ops = runtime.metrics ? await startConfiguredOpsServer(runtime.metrics.registry, config) : null;
  if (!ops) return;
  stops.push(['Metrics', ops.close]);
  // Both addresses, the API's and the Temporal SDK's (its workers run in this process), where a browser or curl on this machine reaches them.
  const temporal = config.GW_TEMPORAL_METRICS_PORT === undefined ? '' : `, http://${scrapeHost(config.GW_TEMPORAL_METRICS_HOST).replace('127.0.0.1', 'localhost')}:${config.GW_TEMPORAL_METRICS_PORT}/metrics (Temporal SDK)`;
  const addresses = `http://localhost:${ops.port}/metrics (API)${temporal}`;
  const binary = prometheusBinary();
  if (!binary) {
    say('Metrics', `${addresses}; no Prometheus on this machine (apt-get install prometheus, or PROMETHEUS_PATH)`);
    return;
  }
  const prometheus = await startPrometheus({
    binary, dir: path.join(config.dataDir, 'prometheus'), port: await preferredPort(9090),
    jobs: [
      // With GW_METRICS_TOKEN set, Prometheus sends it as the ops port asks.
      { name: 'gateway-api', target: `${scrapeHost(config.GW_OPS_HOST)}:${ops.port}`, bearerToken: config.GW_METRICS_TOKEN },
      { name: 'gateway-worker-temporal', target: `${scrapeHost(config.GW_TEMPORAL_METRICS_HOST)}:${config.GW_TEMPORAL_METRICS_PORT}` },
    ],
  });
  stops.push(['Prometheus', prometheus.stop]);
  say('Metrics', `${addresses}; Prometheus at ${prometheus.url.replace('127.0.0.1', 'localhost')} (dashboard: docs/grafana/gateway.json)`);
}

/**
 * Traces: exported where OTEL_EXPORTER_OTLP_ENDPOINT (or the traces one, or OTEL_TRACES_EXPORTER)
 * says; else to a Jaeger started here when this machine has one (scripts/setup-jaeger builds it,
 * as `npm test` does); else off. Before the workers and the API: both look for a tracer as they
 * are made. Returns the trace page template for the console's request page.
 */
async function startTraces(dataDir: string): Promise<string | undefined> {
  if (configuredExporters().length === 0) {
    const binary = jaegerBinary();
    if (!binary) {
      say('Traces', 'off (no Jaeger on this machine: `bash scripts/setup-jaeger` builds one; or set OTEL_EXPORTER_OTLP_ENDPOINT)');
      return undefined;
    }
    const jaeger = await startJaeger({
      binary, dir: path.join(dataDir, 'jaeger'),
      ports: { ui: await preferredPort(16686), otlpHttp: await preferredPort(4318), otlpGrpc: await preferredPort(4317), queryGrpc: await preferredPort(16685), health: await freePort() },
    });
    stops.push(['Jaeger', jaeger.stop]);
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = jaeger.otlpHttpUrl;
    const tracing = startTracing('gw')!;
    // Stopped in reverse: the spans still queued are sent before Jaeger stops.
    stops.push(['Traces', tracing.shutdown]);
    const ui = jaeger.url.replace('127.0.0.1', 'localhost');
    say('Traces', `Jaeger at ${ui} (OTLP ${jaeger.otlpHttpUrl}; service gw)`);
    return `${ui}/trace/{trace_id}`;
  }
  const tracing = startTracing('gw');
  if (tracing) stops.push(['Traces', tracing.shutdown]);
  say('Traces', `exported as OTEL_* says (${process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? process.env.OTEL_EXPORTER_OTLP_ENDPOINT ?? process.env.OTEL_TRACES_EXPORTER})`);
  return undefined;
}

/**
 * Connects the new demo organization to the sandbox through its own management API, and
 * issues a gateway key, so the first `curl` can chat without any setup.
 */
async function connectDemoToSandbox(apiUrl: string, token: string, sandboxUrl: string): Promise<void> {
  const call = async (path: string, body: unknown) => {
    const res = await fetch(`${apiUrl}/manage/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const answer = (await res.json()) as Record<string, string>;
    if (!res.ok) throw new Error(`demo setup: POST ${path} answered ${res.status}`);
    return answer;
  };
  for (const [kind, prefix] of [['openai', 'openai/v1'], ['anthropic', 'anthropic/v1'], ['google', 'google/v1beta']] as const) {
    await call('/provider_connections', { kind, name: `sandbox ${kind}`, secret: `${SANDBOX_SECRET_PREFIX}-demo`, config: { base_url: `${sandboxUrl}/${prefix}` } });
  }
  const project = await call('/projects', { name: 'Demo' });
  const key = await call('/gateway_keys', { label: 'demo', project_id: project.id });
  say('Demo key', `${key.secret} (shown once; connected to the sandbox's openai, anthropic and google)`);
  say('Try', `curl ${apiUrl}/v1/chat/completions -H "Authorization: Bearer ${key.secret}" -H 'content-type: application/json' -d '{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hello"}]}'`);
}

async function main(): Promise<void> {
  const base = loadConfig();
  dataDirLock = lockDataDir(base.dataDir);
  say('Data', `${base.dataDir} (locked by pid ${process.pid})`);
  const services = await startServices(base);
  await applyMigrations(services.databaseUrl);
  say('Migrations', 'applied');
  const demoToken = await bootstrapDemoOrganization(services.databaseUrl, base.dataDir);

  const sandbox = await startSandbox(await preferredPort(Number(process.env.GW_SANDBOX_PORT ?? 8090)));
  stops.push(['Sandbox', sandbox.close]);
  say('Sandbox', `${sandbox.url} (provider simulator: /openai/v1, /anthropic/v1, /google/v1beta; secrets starting ${SANDBOX_SECRET_PREFIX})`);

  let smtpUrl = base.SMTP_URL;
  let mailInbox: string | null = null;
  if (smtpUrl) {
    say('Mail', `${redact(smtpUrl)} (SMTP_URL)`);
  } else {
    const catcher = await startMailCatcher(await preferredPort(Number(process.env.GW_MAIL_SMTP_PORT ?? 1025)), await preferredPort(Number(process.env.GW_MAIL_WEB_PORT ?? 1080)), path.join(base.dataDir, 'mail'));
    stops.push(['Mail', catcher.stop]);
    smtpUrl = catcher.smtpUrl;
    mailInbox = catcher.inboxUrl;
    say('Mail', `${smtpUrl} (local mail catcher: alert emails stay on this machine, inbox at ${mailInbox})`);
  }

  const traceUrlTemplate = await startTraces(base.dataDir);

  // The ops ports: the API's metrics, and the Temporal SDK's (one process runs both here).
  const opsPort = process.env.GW_OPS_PORT ?? String(await preferredPort(9464));
  const temporalMetricsPort = process.env.GW_TEMPORAL_METRICS_PORT ?? String(await preferredPort(9465));
  const config = loadConfig({
    ...process.env,
    GW_OPS_PORT: opsPort,
    GW_TEMPORAL_METRICS_PORT: temporalMetricsPort,
    SMTP_URL: smtpUrl,
    // Development reaches the local sandbox; production keeps the default (public HTTPS only).
    GW_ALLOW_PRIVATE_NETWORK: process.env.GW_ALLOW_PRIVATE_NETWORK ?? 'true',
    GW_SEALING_KEYS: base.GW_SEALING_KEYS ?? developmentSealingKeys(base.dataDir),
    DATABASE_URL: services.databaseUrl,
    REDIS_URL: services.redisUrl,
    TEMPORAL_ADDRESS: services.temporalAddress,
    // The console links each job to its workflow in the dev server's UI.
    GW_TEMPORAL_UI_URL: process.env.GW_TEMPORAL_UI_URL ?? services.temporalUi ?? undefined,
    GW_OPERATOR_ORG_ID: process.env.GW_OPERATOR_ORG_ID || developmentOperatorOrg(base.dataDir),
    // The console's request page links each request to its trace in that Jaeger.
    GW_TRACE_URL_TEMPLATE: process.env.GW_TRACE_URL_TEMPLATE ?? traceUrlTemplate,
  });
  const logger = createLogger(config.LOG_LEVEL, 'gw', terminalLogDestination());
  installTemporalRuntime(config.LOG_LEVEL === 'info' ? 'warn' : config.LOG_LEVEL, temporalMetricsAddress(config));

  say('Workers', 'bundling workflows and connecting...');
  const connection = await NativeConnection.connect({ address: services.temporalAddress });
  const workerDatabase = connectDatabase(services.databaseUrl);
  const workerRedis = connectRedis(services.redisUrl, config.REDIS_KEY_PREFIX);
  const queues = Object.keys(TASK_QUEUES) as TaskQueueName[];
  const workerDeps = queueWorkerDeps(config, connection, workerDatabase.db, workerRedis);
  const workers = await startQueueWorkers(queues, workerDeps);
  stops.push(['Workers', async () => {
    await workers.shutdown();
    const spendRedis = workerDeps.services.spendRedis;
    await Promise.allSettled([connection.close(), workerDatabase.close(), workerRedis.close(), spendRedis === workerRedis ? undefined : spendRedis.close()]);
  }]);
  say('Workers', `polling ${queues.map((q) => taskQueue(q, config.GW_TASK_QUEUE_PREFIX)).join(', ')}`);

  const runtime = await startApiRuntime(config, logger);
  const http = await listen(createApp(runtime.deps), config.PORT, config.HOST);
  stops.push(['API', async () => {
    await http.close(config.GW_SHUTDOWN_GRACE_MS);
    await runtime.close();
  }]);
  const apiUrl = `http://localhost:${http.port}`;
  writeRuntimeFile(config.dataDir, {
    DATABASE_URL: services.databaseUrl,
    REDIS_URL: services.redisUrl,
    TEMPORAL_ADDRESS: services.temporalAddress,
    API_URL: apiUrl,
  });
  say('API', `${apiUrl}  (ready: ${apiUrl}/readyz)`);
  await startMetrics(runtime, config);
  if (demoToken) await connectDemoToSandbox(apiUrl, demoToken, sandbox.url);
  say('Console', `${apiUrl}/console  (sign in with a management token${demoToken ? ', such as the demo token above' : ''})`);
  if (services.temporalUi) say('Temporal UI', services.temporalUi);
  if (mailInbox) say('Mail inbox', mailInbox);
  say('Ready', 'Ctrl-C stops everything started here');
}

/**
 * In a terminal, log lines read as text (pino's own pretty printer: time, level, message, then
 * the fields); JSON when the output is not a terminal or `LOG_FORMAT=json`, for log collectors.
 */
function terminalLogDestination(): DestinationStream | undefined {
  if (!process.stdout.isTTY || process.env.LOG_FORMAT === 'json') return undefined;
  return pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,name', singleLine: true });
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

let stopping = false;
async function stopAll(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    console.log('[gw] stopping...');
    for (const [name, stop] of stops.reverse()) {
      await stop().catch((err: Error) => console.error(`[gw] stopping ${name}: ${err.message}`));
    }
    // The runtime file and the lock are this launcher's only when it took the lock.
    if (dataDirLock) {
      removeRuntimeFile(path.dirname(dataDirLock.file));
      dataDirLock.release();
    }
  }
  process.exit(code);
}

process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));

main().catch(async (err: Error) => {
  console.error(`[gw] cannot start: ${err.message}`);
  // Another launcher owns the folder: nothing was started here, and its files are not ours.
  if (err instanceof DataDirLockedError) process.exit(1);
  if (!(err instanceof ConfigError) && process.env.LOG_LEVEL === 'debug') console.error(err);
  await stopAll(1);
});
