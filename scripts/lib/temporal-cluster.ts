/**
 * A Temporal cluster as operators deploy it, for tests and benches: PostgreSQL persistence and
 * visibility, and frontend, matching, worker and N history services each in its own OS process
 * (binaries from scripts/setup-temporal-cluster), plus the Web UI server on request. Every
 * process gets its own config file and ports, so one can be killed and restarted alone.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client as PgClient, Pool } from 'pg';
import { Client, Connection } from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time';
import { grpc, temporal } from '@temporalio/proto';
import { isPortFree } from './ports';

const run = promisify(execFile);

export type SearchAttributeKind = 'Keyword' | 'Text' | 'Int' | 'Double' | 'Bool' | 'Datetime' | 'KeywordList';

export type ClusterOptions = {
  /** Holds temporal-server, temporal-sql-tool and temporal-ui-server (scripts/setup-temporal-cluster). */
  binDir: string;
  /** Admin URL, e.g. postgres://postgres@127.0.0.1:5432/postgres: creates and drops the databases. */
  postgresUrl: string;
  /** Names the databases `<prefix>` and `<prefix>_visibility`, e.g. temporal_cluster_<run>. */
  databasePrefix: string;
  historyShards?: number;
  historyProcesses?: number;
  /** Web UI port; omitted runs no UI. */
  uiPort?: number;
  /** Where the Web UI decodes sealed payloads (the API's /temporal-codec). */
  uiCodecEndpoint?: string;
  /** Config files and one log file per process go here. */
  logDir: string;
  namespace?: string;
  searchAttributes?: Record<string, SearchAttributeKind>;
  /** The servers' log level (default info). */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** Versioned schema folders (`<dir>/temporal/versioned`, `<dir>/visibility/versioned`); omitted uses the SQL tool's embedded ones. */
  schemaDir?: string;
  /** Each server process serves Prometheus metrics on a port of its own (ClusterProcess.metricsPort). */
  metrics?: boolean;
  /** Extra dynamic config, key to value (the file is re-read every 10 s). */
  dynamicConfig?: Record<string, unknown>;
  /** Connections each process may open to the main database (default 8; the visibility one gets half). */
  sqlMaxConns?: number;
};

/**
 * The dynamic config the dev server runs with (scripts/lib/temporal-dev-server.ts): timers fire
 * when due rather than up to a second late (the tests' compressed schedules need it), and a
 * workflow's first activity goes to the worker that scheduled it. Tests and the bench give the
 * cluster the same, so the two measure the same thing.
 */
export const DEV_SERVER_LIKE_DYNAMIC_CONFIG: Record<string, unknown> = {
  'history.timerProcessorMaxTimeShift': '10ms',
  'system.enableActivityEagerExecution': true,
};

export type ClusterService = 'frontend' | 'history' | 'matching' | 'worker' | 'ui';

export type ClusterProcess = {
  /** frontend, matching, worker, history-1..N, ui */
  name: string;
  service: ClusterService;
  /** gRPC port (the UI's HTTP port for ui). */
  port: number;
  membershipPort: number | null;
  metricsPort: number | null;
  configFile: string;
  logFile: string;
  /** Null while not running. */
  pid: number | null;
};

export type TemporalCluster = {
  /** Frontend gRPC host:port. */
  address: string;
  uiUrl: string | null;
  namespace: string;
  databases: { main: string; visibility: string };
  processes: ClusterProcess[];
  /** How long the start took: databases and schemas, then processes until a workflow starts. */
  timings: { schemaMs: number; serversMs: number; totalMs: number };
  /** SIGKILL one process, e.g. 'history-1'. */
  kill(name: string): Promise<void>;
  /** Start it again (SIGTERM first if it runs) with the same config and ports; resolves when it serves. */
  restart(name: string): Promise<void>;
  /** Resident memory in bytes of each running process. */
  rss(): Promise<Record<string, number>>;
  /** SIGTERM everything (SIGKILL after 10 s), then drop both databases. */
  stop(): Promise<void>;
};

const START_TIMEOUT_MS = 90_000;
const STOP_GRACE_MS = 10_000;
/** Roles in cluster_membership (persistence.ServiceType). */
const ROLE: Record<string, number> = { frontend: 1, history: 2, matching: 3, worker: 4 };
/** What each service registers with its gRPC health server. */
const HEALTH_SERVICE: Record<string, string> = {
  frontend: 'temporal.api.workflowservice.v1.WorkflowService',
  history: 'temporal.api.workflowservice.v1.HistoryService',
  matching: 'temporal.api.workflowservice.v1.MatchingService',
};
const SA_TYPES: Record<SearchAttributeKind, { indexed: temporal.api.enums.v1.IndexedValueType; sdk: SearchAttributeType; probe: unknown }> = {
  Keyword: { indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD, sdk: SearchAttributeType.KEYWORD, probe: 'probe' },
  Text: { indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_TEXT, sdk: SearchAttributeType.TEXT, probe: 'probe' },
  Int: { indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT, sdk: SearchAttributeType.INT, probe: 1 },
  Double: { indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE, sdk: SearchAttributeType.DOUBLE, probe: 1.5 },
  Bool: { indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_BOOL, sdk: SearchAttributeType.BOOL, probe: true },
  Datetime: { indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_DATETIME, sdk: SearchAttributeType.DATETIME, probe: new Date(0) },
  KeywordList: { indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST, sdk: SearchAttributeType.KEYWORD_LIST, probe: ['probe'] },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const grpcCode = (err: unknown): number | undefined => (err as { code?: number } | null)?.code;

/**
 * A free port below 32768: cluster_membership.rpc_port is a SMALLINT, so a membership port in
 * Linux's ephemeral range (32768-60999, where freePort() lands) cannot be stored. Outside that
 * range no outgoing connection takes the port either while a killed process is down.
 */
async function lowPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + crypto.randomInt(12_000);
    if (taken.has(port) || !(await isPortFree(port))) continue;
    taken.add(port);
    return port;
  }
  throw new Error('temporal cluster: found no free port in 20000-31999');
}

/** The last lines of a log, JSON log lines shown as `level: msg (error)`, on one line. */
function tailLog(file: string, lines = 4): string {
  let text = '';
  try {
    const fd = fs.openSync(file, 'r');
    const size = fs.fstatSync(fd).size;
    const buf = Buffer.alloc(Math.min(size, 32_768));
    fs.readSync(fd, buf, 0, buf.length, size - buf.length);
    fs.closeSync(fd);
    text = buf.toString('utf8');
  } catch {
    return '(no log)';
  }
  const shown = text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('--- temporal cluster:')).slice(-lines).map((l) => {
    try {
      const j = JSON.parse(l) as { level?: string; msg?: string; error?: string };
      return `${j.level ?? '?'}: ${j.msg ?? ''}${j.error ? ` (${j.error})` : ''}`;
    } catch {
      return l;
    }
  });
  return shown.join(' | ') || '(empty log)';
}

type Proc = ClusterProcess & { child: ChildProcess | null; exited: Promise<void>; args: string[]; binary: string };

export async function startTemporalCluster(options: ClusterOptions): Promise<TemporalCluster> {
  const t0 = Date.now();
  const namespace = options.namespace ?? 'default';
  const shards = options.historyShards ?? 8;
  const historyCount = options.historyProcesses ?? 2;
  const maxConns = options.sqlMaxConns ?? 8;
  const searchAttributes = options.searchAttributes ?? {};
  const logDir = path.resolve(options.logDir);
  const configDir = path.join(logDir, 'config');
  fs.mkdirSync(configDir, { recursive: true });
  if (!/^[a-z_][a-z0-9_]*$/.test(options.databasePrefix)) throw new Error(`temporal cluster: databasePrefix ${options.databasePrefix} must be lower-case letters, digits and _`);
  const databases = { main: options.databasePrefix, visibility: `${options.databasePrefix}_visibility` };

  const admin = new URL(options.postgresUrl);
  const pgHost = admin.hostname || '127.0.0.1';
  const pgPort = Number(admin.port || 5432);
  const pgUser = decodeURIComponent(admin.username || 'postgres');
  const pgPassword = decodeURIComponent(admin.password);
  const dbUrl = (db: string) => {
    const u = new URL(options.postgresUrl);
    u.pathname = `/${db}`;
    return u.toString();
  };

  const procs: Proc[] = [];
  let exitHook: (() => void) | null = null;
  let clusterDb: Pool | null = null;
  let dbsCreated = false;
  let abandoned = false;

  async function dropDatabases(): Promise<void> {
    const pg = new PgClient({ connectionString: options.postgresUrl });
    await pg.connect();
    try {
      for (const db of [databases.main, databases.visibility]) {
        await pg.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db]);
        await pg.query(`DROP DATABASE IF EXISTS "${db}"`);
      }
    } finally {
      await pg.end();
    }
  }

  function stopProc(p: Proc): Promise<void> {
    const child = p.child;
    if (!child || p.pid === null) return Promise.resolve();
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    return p.exited.finally(() => clearTimeout(timer));
  }

  async function teardown(): Promise<void> {
    abandoned = true;
    await Promise.all(procs.map(stopProc));
    if (exitHook) process.off('exit', exitHook);
    await clusterDb?.end().catch(() => {});
    clusterDb = null;
    if (dbsCreated) await dropDatabases();
  }

  try {
    // Databases and schemas.
    const pg = new PgClient({ connectionString: options.postgresUrl });
    await pg.connect();
    try {
      for (const db of [databases.main, databases.visibility]) {
        const exists = await pg.query('SELECT 1 FROM pg_database WHERE datname = $1', [db]);
        if (exists.rowCount) throw new Error(`temporal cluster: database ${db} already exists (left by an earlier run? drop it, or use another databasePrefix)`);
      }
      await pg.query(`CREATE DATABASE "${databases.main}"`);
      dbsCreated = true;
      await pg.query(`CREATE DATABASE "${databases.visibility}"`);
    } finally {
      await pg.end();
    }
    const sqlTool = path.join(options.binDir, 'temporal-sql-tool');
    const toolArgs = (db: string) => ['--plugin', 'postgres12', '--ep', pgHost, '-p', String(pgPort), '-u', pgUser, '--db', db];
    const applySchema = async (db: string, kind: 'temporal' | 'visibility') => {
      const source = options.schemaDir ? ['-d', path.join(options.schemaDir, kind, 'versioned')] : ['-s', `postgresql/v12/${kind}`];
      for (const args of [['setup-schema', '-v', '0.0'], ['update-schema', ...source]]) {
        await run(sqlTool, [...toolArgs(db), ...args], { maxBuffer: 16 * 1024 * 1024, env: { ...process.env, SQL_PASSWORD: pgPassword } }).catch((err: { stderr?: string; message: string }) => {
          const said = (err.stderr ?? '').trim().split('\n').filter((l) => /error|fatal/i.test(l)).pop() ?? err.message;
          throw new Error(`temporal cluster: temporal-sql-tool ${args[0]} on ${db} failed: ${said.trim()}`);
        });
      }
    };
    await Promise.all([applySchema(databases.main, 'temporal'), applySchema(databases.visibility, 'visibility')]);
    const schemaMs = Date.now() - t0;

    // Ports and config files, one per process.
    const taken = new Set<number>();
    const rpc = async (http = false) => ({ grpcPort: await lowPort(taken), membershipPort: await lowPort(taken), ...(http ? { httpPort: await lowPort(taken) } : {}), bindOnIP: '127.0.0.1' });
    const frontend = await rpc(true);
    const matching = await rpc();
    const worker = await rpc();
    const histories: Array<Awaited<ReturnType<typeof rpc>>> = [];
    for (let i = 0; i < historyCount; i++) histories.push(await rpc());
    const address = `127.0.0.1:${frontend.grpcPort}`;

    const dynamicConfigFile = path.join(configDir, 'dynamicconfig.yaml');
    // JSON is YAML; the server and the UI read their files with yaml.v3.
    const dynamicValues: Record<string, unknown> = { ...options.dynamicConfig };
    fs.writeFileSync(dynamicConfigFile, JSON.stringify(Object.fromEntries(Object.entries(dynamicValues).map(([k, v]) => [k, [{ value: v, constraints: {} }]])), null, 2) + '\n');

    const sql = (db: string, conns: number) => ({
      sql: { pluginName: 'postgres12', databaseName: db, connectAddr: `${pgHost}:${pgPort}`, connectProtocol: 'tcp', user: pgUser, password: pgPassword, maxConns: conns, maxIdleConns: conns, maxConnLifetime: '1h' },
    });
    const serverConfig = (history: (typeof histories)[number], metricsPort: number | null) => ({
      log: { stdout: true, level: options.logLevel ?? 'info' },
      persistence: {
        defaultStore: 'default',
        visibilityStore: 'visibility',
        numHistoryShards: shards,
        datastores: { default: sql(databases.main, maxConns), visibility: sql(databases.visibility, Math.max(2, Math.ceil(maxConns / 2))) },
      },
      global: {
        membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
        ...(metricsPort ? { metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${metricsPort}` } } } : {}),
      },
      // Other services find each other through membership; only the own section's ports bind.
      services: { frontend: { rpc: frontend }, matching: { rpc: matching }, worker: { rpc: worker }, history: { rpc: history } },
      clusterMetadata: {
        enableGlobalNamespace: false,
        failoverVersionIncrement: 10,
        masterClusterName: 'active',
        currentClusterName: 'active',
        clusterInformation: { active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: address, httpAddress: `127.0.0.1:${frontend.httpPort}` } },
      },
      dcRedirectionPolicy: { policy: 'noop' },
      dynamicConfigClient: { filepath: dynamicConfigFile, pollInterval: '10s' },
    });

    const serverBinary = path.join(options.binDir, 'temporal-server');
    const addServer = async (name: string, service: Exclude<ClusterService, 'ui'>, ports: (typeof histories)[number], history: (typeof histories)[number]) => {
      const metricsPort = options.metrics ? await lowPort(taken) : null;
      const configFile = path.join(configDir, `${name}.yaml`);
      fs.writeFileSync(configFile, JSON.stringify(serverConfig(history, metricsPort), null, 2) + '\n');
      // The config is <root>/<config>/<env>.yaml: one env per process, in one folder.
      const args = ['--root', configDir, '--config', '.', '--env', name, '--allow-no-auth', 'start', '--service', service];
      procs.push({ name, service, port: ports.grpcPort, membershipPort: ports.membershipPort, metricsPort, configFile, logFile: path.join(logDir, `${name}.log`), pid: null, child: null, exited: Promise.resolve(), args, binary: serverBinary });
    };
    await addServer('frontend', 'frontend', frontend, histories[0]!);
    await addServer('matching', 'matching', matching, histories[0]!);
    await addServer('worker', 'worker', worker, histories[0]!);
    for (let i = 0; i < historyCount; i++) await addServer(`history-${i + 1}`, 'history', histories[i]!, histories[i]!);

    let uiUrl: string | null = null;
    if (options.uiPort) {
      uiUrl = `http://127.0.0.1:${options.uiPort}`;
      const codecOrigin = options.uiCodecEndpoint ? new URL(options.uiCodecEndpoint).origin : null;
      const uiConfig = {
        temporalGrpcAddress: address,
        host: '127.0.0.1',
        port: options.uiPort,
        enableUi: true,
        defaultNamespace: namespace,
        // Plain http: a Secure CSRF cookie would not come back from a non-localhost name.
        cors: { cookieInsecure: true, unsafeAllowAllOrigins: false, allowOrigins: [uiUrl, `http://localhost:${options.uiPort}`, ...(codecOrigin ? [codecOrigin] : [])] },
        // The gateway's codec authenticates by its own session cookie (api/temporal-codec.ts), not the UI's access token.
        codec: { endpoint: options.uiCodecEndpoint ?? '', includeCredentials: Boolean(options.uiCodecEndpoint), passAccessToken: false },
        notifyOnNewVersion: false,
      };
      const configFile = path.join(configDir, 'ui.yaml');
      fs.writeFileSync(configFile, JSON.stringify(uiConfig, null, 2) + '\n');
      procs.push({ name: 'ui', service: 'ui', port: options.uiPort, membershipPort: null, metricsPort: null, configFile, logFile: path.join(logDir, 'ui.log'), pid: null, child: null, exited: Promise.resolve(), args: ['--root', configDir, '--config', '.', '--env', 'ui', 'start'], binary: path.join(options.binDir, 'temporal-ui-server') });
    }

    exitHook = () => {
      for (const p of procs) if (p.pid !== null) p.child?.kill('SIGKILL');
    };
    process.once('exit', exitHook);

    const find = (name: string): Proc => {
      const p = procs.find((x) => x.name === name);
      if (!p) throw new Error(`temporal cluster: no process ${name} (have ${procs.map((x) => x.name).join(', ')})`);
      return p;
    };

    const spawnProc = (p: Proc) => {
      const fd = fs.openSync(p.logFile, 'a');
      fs.writeSync(fd, `--- temporal cluster: starting ${p.name} at ${new Date().toISOString()}: ${p.binary} ${p.args.join(' ')}\n`);
      const child = spawn(p.binary, p.args, { stdio: ['ignore', fd, fd], cwd: logDir });
      fs.closeSync(fd);
      p.child = child;
      p.pid = child.pid ?? null;
      p.exited = new Promise<void>((resolve) => {
        child.once('error', () => resolve());
        child.once('exit', () => {
          if (p.child === child) p.pid = null;
          resolve();
        });
      });
    };

    /** Throws the one-line error of a process that died while we wait on it. */
    const assertAlive = (list: Proc[], during: string) => {
      for (const p of list) {
        const child = p.child;
        if (child && (child.exitCode !== null || child.signalCode !== null || p.pid === null)) {
          const how = child.signalCode ? `signal ${child.signalCode}` : `code ${child.exitCode}`;
          throw new Error(`temporal cluster: ${p.name} exited (${how}) ${during}; ${path.basename(p.logFile)}: ${tailLog(p.logFile)}`);
        }
      }
    };

    const waitUntil = async (what: string, watch: Proc[], probe: () => Promise<boolean>, timeoutMs = START_TIMEOUT_MS) => {
      const deadline = Date.now() + timeoutMs;
      let lastError = '';
      for (;;) {
        // A parallel wait failed and the cluster is being torn down: stop polling it.
        if (abandoned) throw new Error('temporal cluster: start abandoned');
        assertAlive(watch, `while waiting for ${what}`);
        const ok = await probe().catch((err: Error) => {
          lastError = err.message;
          return false;
        });
        if (ok) return;
        if (Date.now() > deadline) {
          const logs = watch.filter((p) => p.service !== 'ui').map((p) => `${p.name}: ${tailLog(p.logFile, 2)}`).join('; ');
          throw new Error(`temporal cluster: ${what} not within ${Math.round(timeoutMs / 1000)} s${lastError ? ` (last: ${lastError})` : ''}; ${logs}`);
        }
        await sleep(250);
      }
    };

    // Watches cluster_membership and the metadata rows while processes start and restart.
    clusterDb = new Pool({ connectionString: dbUrl(databases.main), max: 2, idleTimeoutMillis: 5000 });
    clusterDb.on('error', () => {}); // an idle client's backend ended; the next query reconnects
    const db = clusterDb;

    const healthServing = async (p: Proc): Promise<boolean> => {
      const conn = Connection.lazy({ address: `127.0.0.1:${p.port}` });
      try {
        const res = await conn.withDeadline(Date.now() + 1000, () => conn.healthService.check({ service: HEALTH_SERVICE[p.service] }));
        return res.status === grpc.health.v1.HealthCheckResponse.ServingStatus.SERVING;
      } finally {
        await conn.close();
      }
    };
    /** Its hosts in cluster_membership (each start registers a new host id). */
    const membershipHosts = async (p: Proc): Promise<string[]> => {
      const res = await db.query<{ host: string }>("SELECT encode(host_id, 'hex') AS host FROM cluster_membership WHERE role = $1 AND rpc_port = $2", [ROLE[p.service], p.membershipPort]);
      return res.rows.map((r) => r.host);
    };
    const waitServerUp = async (p: Proc, oldHosts: string[], watch: Proc[]) => {
      await waitUntil(`${p.name} in membership`, watch, async () => (await membershipHosts(p)).some((h) => !oldHosts.includes(h)));
      if (HEALTH_SERVICE[p.service]) await waitUntil(`${p.name} serving`, watch, () => healthServing(p));
    };
    const waitUiUp = (p: Proc, watch: Proc[]) => waitUntil('the Web UI', watch, async () => (await fetch(`${uiUrl}/`, { signal: AbortSignal.timeout(2000) })).status === 200);

    // One process first: every server initializes the cluster metadata row on an empty database,
    // and two doing it at once makes one exit ("cluster metadata init failed").
    const servers = procs.filter((p) => p.service !== 'ui');
    const first = find('frontend');
    spawnProc(first);
    await waitUntil('cluster metadata', [first], async () => {
      const res = await db.query("SELECT (SELECT count(*) FROM cluster_metadata_info)::int AS c, (SELECT count(*) FROM namespaces WHERE name = 'temporal-system')::int AS n");
      return res.rows[0].c > 0 && res.rows[0].n > 0;
    });
    for (const p of procs) if (p !== first) spawnProc(p);
    const ui = procs.find((p) => p.service === 'ui');

    // The namespace and search attributes need only the frontend and the database: registered
    // while history hosts acquire their shards (then wait 5 s before they report serving).
    const registerNamespace = async () => {
      await waitServerUp(first, [], servers);
      const connection = await Connection.connect({ address });
      try {
        await waitUntil(`namespace ${namespace}`, servers, async () => {
          try {
            await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
          } catch (err) {
            if (grpcCode(err) !== 6) throw err; // ALREADY_EXISTS
          }
          return true;
        });
        const wanted = Object.entries(searchAttributes);
        if (!wanted.length) return;
        // NOT_FOUND until the frontend's namespace cache refreshes (every 2 s).
        await waitUntil('search attributes added', servers, async () => {
          try {
            await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: Object.fromEntries(wanted.map(([k, t]) => [k, SA_TYPES[t].indexed])) });
          } catch (err) {
            if (grpcCode(err) !== 6) throw err;
          }
          return true;
        });
        await waitUntil('search attributes listed', servers, async () => {
          const res = await connection.operatorService.listSearchAttributes({ namespace });
          return wanted.every(([k, t]) => res.customAttributes?.[k] === SA_TYPES[t].indexed);
        });
      } finally {
        await connection.close();
      }
    };
    await Promise.all([
      registerNamespace(),
      ...servers.filter((p) => p !== first).map((p) => waitServerUp(p, [], servers)),
      ...(ui ? [waitUiUp(ui, [ui])] : []),
    ]);

    const saPairs = Object.entries(searchAttributes).map(([k, t]) => ({ key: defineSearchAttributeKey(k, SA_TYPES[t].sdk), value: SA_TYPES[t].probe }) as SearchAttributePair);
    /**
     * A workflow can be started (frontend, the namespace and search attributes known, a history
     * shard), described (history) and its task queue described (matching), then terminated.
     */
    const probeWorkflow = async (watch: Proc[], what: string) => {
      const conn = await Connection.connect({ address });
      const client = new Client({ connection: conn, namespace });
      try {
        await waitUntil(what, watch, async () => {
          const taskQueue = 'temporal-cluster-probe';
          const handle = await conn.withDeadline(Date.now() + 5000, () => client.workflow.start('temporalClusterProbe', { taskQueue, workflowId: `temporal-cluster-probe-${crypto.randomUUID()}`, typedSearchAttributes: saPairs }));
          await conn.withDeadline(Date.now() + 5000, () => handle.describe());
          await conn.withDeadline(Date.now() + 5000, () => conn.workflowService.describeTaskQueue({ namespace, taskQueue: { name: taskQueue }, taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW }));
          await conn.withDeadline(Date.now() + 5000, () => handle.terminate('temporal cluster probe'));
          return true;
        });
      } finally {
        await conn.close();
      }
    };
    await probeWorkflow(servers, 'a workflow start');
    const timings = { schemaMs, serversMs: Date.now() - t0 - schemaMs, totalMs: Date.now() - t0 };
    fs.writeFileSync(path.join(logDir, 'started.json'), JSON.stringify({ address, uiUrl, ...timings, processes: procs.map(({ name, port, membershipPort, metricsPort, pid }) => ({ name, port, membershipPort, metricsPort, pid })) }, null, 2) + '\n');

    const processes: ClusterProcess[] = procs;
    return {
      address,
      uiUrl,
      namespace,
      databases,
      processes,
      timings,
      async kill(name) {
        const p = find(name);
        if (p.pid === null || !p.child) return;
        p.child.kill('SIGKILL');
        await p.exited;
      },
      async restart(name) {
        const p = find(name);
        await stopProc(p);
        const oldHosts = p.service === 'ui' ? [] : await membershipHosts(p);
        spawnProc(p);
        if (p.service === 'ui') return waitUiUp(p, [p]);
        await waitServerUp(p, oldHosts, [p]);
        await probeWorkflow([p], `a workflow start after restarting ${name}`);
      },
      async rss() {
        const out: Record<string, number> = {};
        for (const p of procs) {
          if (p.pid === null) continue;
          const status = await fs.promises.readFile(`/proc/${p.pid}/status`, 'utf8').catch(() => ''); // exited meanwhile
          const m = /VmRSS:\s+(\d+) kB/.exec(status);
          if (m) out[p.name] = Number(m[1]) * 1024;
        }
        return out;
      },
      stop: teardown,
    };
  } catch (err) {
    await teardown().catch(() => {});
    throw err;
  }
}
