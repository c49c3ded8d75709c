import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { TEST_SEALING_KEYS } from './sealing-keys';
import { applyMigrations } from '../../core/db/migrate';
import { freePort } from '../../scripts/lib/ports';
import { postgresAnswers, redisAnswers, startEmbeddedPostgres, startRedisServer } from '../../scripts/lib/local-services';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';
import { DEV_SERVER_LIKE_DYNAMIC_CONFIG, startTemporalCluster } from '../../scripts/lib/temporal-cluster';
import { startTemporalDevServer } from '../../scripts/lib/temporal-dev-server';
import { SEARCH_ATTRIBUTES } from '../../workflows/definitions';
import { startClusterControl } from './cluster-control';
import { quietBundlerLogger } from '../../workers/queues';
import { bundleGatewayWorkflows } from '../../workers/temporal';

/**
 * Real services for the run: a fresh database on the machine's Postgres (or an embedded one),
 * a key prefix on its Redis (or a redis-server we start), and a Temporal dev server of our own.
 * Workers read what they need from the environment set here.
 */
export default async function globalSetup(): Promise<void> {
  const run = `${Date.now().toString(36)}${process.pid}`;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-test-'));
  const stops: Array<() => Promise<void>> = [];
  const log = (m: string) => process.stderr.write(`[test setup] ${m}\n`);

  let adminUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  if (!(await postgresAnswers(adminUrl))) {
    log(`no Postgres at ${adminUrl.replace(/\/\/[^@]*@/, '//')}; starting an embedded one`);
    fs.chmodSync(scratch, 0o777);
    const pg = await startEmbeddedPostgres(path.join(scratch, 'pg'), await freePort());
    stops.push(pg.stop);
    adminUrl = pg.url;
  }
  const database = `gw_test_${run}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  process.env.DATABASE_URL = url.toString();
  await applyMigrations(process.env.DATABASE_URL);

  let redisUrl = process.env.TEST_REDIS_URL ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  if (!(await redisAnswers(redisUrl))) {
    log(`no Redis at ${redisUrl}; starting redis-server`);
    const redis = await startRedisServer(await freePort());
    stops.push(redis.stop);
    redisUrl = redis.url;
  }
  process.env.REDIS_URL = redisUrl;
  process.env.REDIS_KEY_PREFIX = `gwtest:${run}:`;

  if (process.env.GW_TEST_TEMPORAL === 'cluster') {
    // `npm run test:cluster`: a Temporal cluster as operators run it (issue 55), its processes
    // killed and restarted by tests through a control endpoint of this process.
    // Its Web UI decodes through the codec of an API the UI test starts on this port.
    const codecPort = await freePort();
    const cluster = await startTemporalCluster({
      binDir: process.env.TEMPORAL_CLUSTER_BIN!, postgresUrl: adminUrl, databasePrefix: `temporal_${run}`, logDir: path.join(scratch, 'temporal-cluster'),
      historyShards: 8, historyProcesses: 2, logLevel: 'warn', searchAttributes: SEARCH_ATTRIBUTES, dynamicConfig: DEV_SERVER_LIKE_DYNAMIC_CONFIG,
      uiPort: await freePort(), uiCodecEndpoint: `http://127.0.0.1:${codecPort}/temporal-codec`,
    });
    process.env.GW_TEST_CODEC_PORT = String(codecPort);
    process.env.GW_TEST_TEMPORAL_UI_URL = cluster.uiUrl!;
    stops.push(cluster.stop);
    log(`Temporal cluster at ${cluster.address} (${cluster.processes.map((p) => p.name).join(', ')}) in ${(cluster.timings.totalMs / 1000).toFixed(1)} s`);
    process.env.TEMPORAL_ADDRESS = cluster.address;
    const control = await startClusterControl(cluster);
    stops.push(control.close);
    process.env.GW_TEST_CLUSTER_CONTROL = control.url;
  } else {
    const temporal = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort(), preciseTimers: true });
    stops.push(temporal.stop);
    process.env.TEMPORAL_ADDRESS = temporal.address;
  }

  // Bundling workflows takes seconds; do it once for every test file's workers.
  const { code } = await bundleGatewayWorkflows(quietBundlerLogger);
  const bundlePath = path.join(scratch, 'workflow-bundle.js');
  fs.writeFileSync(bundlePath, code);
  process.env.GW_TEST_WORKFLOW_BUNDLE = bundlePath;
  // A fixed key: Temporal payloads are sealed with it, and the histories the tests record and
  // commit (test/replay/histories) must open in every later run.
  process.env.GW_SEALING_KEYS = TEST_SEALING_KEYS;
  // Job outputs and other files go to the run's scratch folder, never the working tree.
  process.env.GW_DATA_DIR = path.join(scratch, 'data');
  process.env.NODE_ENV = 'test';
  process.env.LOG_LEVEL = process.env.LOG_LEVEL ?? 'silent';

  (globalThis as Record<string, unknown>).__gwTeardown = { adminUrl, database, redisUrl, scratch, stops };
}
