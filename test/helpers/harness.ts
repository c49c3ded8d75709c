import { Client as PgClient } from 'pg';
import { applyMigrations } from '../../core/db/migrate';
import { NativeConnection } from '@temporalio/worker';
import { createApp } from '../../api/app';
import { listen } from '../../api/listen';
import { startApiRuntime, type ApiRuntime } from '../../api/runtime';
import { loadConfig, type Config } from '../../core/config';
import { connectDatabase, type DatabaseHandle } from '../../core/db/client';
import { createLogger } from '../../core/logger';
import { connectRedis, type RedisHandle } from '../../core/redis';
import type { TaskQueueName } from '../../workflows/definitions';
import { queueWorkerDeps, startQueueWorkers, type ActivityServices, type RunningWorkers } from '../../workers/queues';
import { installTemporalRuntime } from '../../workers/temporal';
import type { AppDeps } from '../../api/app';

/** A per-file task-queue prefix keeps one test file's workers from serving another's workflows. */
export function uniquePrefix(label: string): string {
  return `t${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}-${label}-`;
}

/**
 * Test APIs trust X-Forwarded-For so each test can speak from its own client address: failed
 * authentications are counted per address, and tests must not share one count.
 */
export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({ ...process.env, NODE_ENV: 'test', GW_TRUST_PROXY: 'true', ...overrides });
}

export function randomClientAddress(): string {
  const octet = () => 1 + Math.floor(Math.random() * 250);
  return `10.${octet()}.${octet()}.${octet()}`;
}

export type TestApi = {
  url: string;
  config: Config;
  runtime: ApiRuntime;
  close(): Promise<void>;
  /** The production stop: requests under way may answer for `graceMs`, then the runtime closes. Close after it does nothing. */
  stop(graceMs: number): Promise<void>;
};

/** The real API (real Postgres, Redis, Temporal client) on a free port; deps can be overridden. */
export async function startTestApi(
  options: { env?: Record<string, string>; deps?: (deps: AppDeps) => AppDeps; port?: number } = {},
): Promise<TestApi> {
  const config = testConfig(options.env);
  const runtime = await startApiRuntime(config, createLogger('silent'));
  const deps = options.deps ? options.deps(runtime.deps) : runtime.deps;
  const server = await listen(createApp(deps), options.port ?? 0, '127.0.0.1');
  let stopped = false;
  return {
    url: `http://127.0.0.1:${server.port}`,
    config,
    runtime,
    async close() {
      if (stopped) return;
      stopped = true;
      await server.close();
      await runtime.close();
    },
    async stop(graceMs) {
      stopped = true;
      await server.close(graceMs);
      await runtime.close();
    },
  };
}

export function testDatabase(): DatabaseHandle {
  return connectDatabase(process.env.DATABASE_URL!, { max: 4 });
}

export function testRedis(): RedisHandle {
  return connectRedis(process.env.REDIS_URL!, process.env.REDIS_KEY_PREFIX!);
}

/** Real workers on the test Temporal server, serving the prebuilt workflow bundle; `adjust` swaps in test hooks. */
export async function startTestWorkers(
  names: readonly TaskQueueName[],
  taskQueuePrefix: string,
  env: Record<string, string> = {},
  adjust: (services: ActivityServices) => ActivityServices = (s) => s,
): Promise<RunningWorkers & { connection: NativeConnection }> {
  try {
    installTemporalRuntime('warn');
  } catch {
    // Already installed by an earlier test file in this Jest worker process.
  }
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  const database = testDatabase();
  const redis = testRedis();
  const config = testConfig({ GW_TASK_QUEUE_PREFIX: taskQueuePrefix, ...env });
  const deps = queueWorkerDeps(config, connection, database.db, redis, { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! });
  // Tests start the scheduled workflows they check themselves: the schedules keep the real
  // interval, so none fires in the middle of a test whatever GW_SCHEDULE_SCALE the test sets.
  const running = await startQueueWorkers(names, { ...deps, namespace: 'default', taskQueuePrefix, scheduleScale: 1, services: adjust(deps.services) });
  return {
    ...running,
    connection,
    async shutdown() {
      await running.shutdown();
      await Promise.allSettled([connection.close(), database.close(), redis.close()]);
    },
  };
}

/**
 * A database of a test's own, migrated, on the run's Postgres: for code that walks every row of
 * a table (a sweep, a walk over organizations), which the shared test database would fill with
 * other files' rows. `drop()` removes it.
 */
export async function isolatedDatabase(name: string): Promise<{ db: DatabaseHandle; drop(): Promise<void> }> {
  const database = `gw_${name}_${process.pid}_${Date.now().toString(36)}`;
  const adminUrl = new URL(process.env.DATABASE_URL!);
  adminUrl.pathname = '/postgres';
  const admin = new PgClient({ connectionString: adminUrl.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const url = new URL(process.env.DATABASE_URL!);
  url.pathname = `/${database}`;
  await applyMigrations(url.toString());
  const db = connectDatabase(url.toString(), { max: 2 });
  return {
    db,
    async drop() {
      await db.close();
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
    },
  };
}
