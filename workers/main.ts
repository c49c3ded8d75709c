import fs from 'node:fs';
import path from 'node:path';
import { NativeConnection, type WorkerOptions } from '@temporalio/worker';
import { ConfigError, loadConfig, requireSetting } from '../core/config';
import { connectDatabase } from '../core/db/client';
import { createLogger } from '../core/logger';
import { createProcessMetrics, describeOpsServer, redisClients, startConfiguredOpsServer, temporalMetricsAddress, watchConnections } from '../core/observability/metrics';
import { startTracing } from '../core/observability/tracing';
import { connectRedis } from '../core/redis';
import type { TaskQueueName } from '../workflows/definitions';
import { queueWorkerDeps, startQueueWorkers } from './queues';
import { installTemporalRuntime, refusedServerVersion } from './temporal';

/**
 * The workflow code built ahead, which saves each start the bundling: GW_WORKFLOW_BUNDLE when
 * set (the tests' bundle), else the one `npm run build` writes beside the compiled entries'
 * folders (dist/workflow-bundle.js, `..` from dist/workers/). Run from source (tsx), that file
 * does not exist and the worker bundles workflows/ as it starts.
 */
function prebuiltWorkflowBundle(): WorkerOptions['workflowBundle'] {
  if (process.env.GW_WORKFLOW_BUNDLE) return { codePath: process.env.GW_WORKFLOW_BUNDLE };
  const built = path.resolve(__dirname, '..', 'workflow-bundle.js');
  return fs.existsSync(built) ? { codePath: built } : undefined;
}

/** Entry shared by the per-queue worker processes: connect, serve the queues, stop on a signal. */
export async function runWorkerProcess(names: readonly TaskQueueName[]): Promise<void> {
  const log = createLogger(process.env.LOG_LEVEL, 'gw-worker');
  try {
    const config = loadConfig();
    installTemporalRuntime(config.LOG_LEVEL, temporalMetricsAddress(config));
    // The process's own metrics (event loop, GC, heap) on the ops port, as the API's.
    const metrics = config.GW_OPS_PORT === undefined ? null : createProcessMetrics('gw-worker');
    // Before the workers: their interceptors and span sink look for a tracer as they are made.
    const tracing = startTracing(`gw-worker-${names.join('-')}`);
    const ops = metrics ? await startConfiguredOpsServer(metrics, config) : null;
    if (ops) {
      const { message, warning } = describeOpsServer(ops, config);
      log.info({ port: ops.port, address: ops.address }, message);
      if (warning) log.warn(warning);
    }
    const database = connectDatabase(requireSetting(config, 'DATABASE_URL'));
    const redis = connectRedis(requireSetting(config, 'REDIS_URL'), config.REDIS_KEY_PREFIX);
    const connection = await NativeConnection.connect({ address: requireSetting(config, 'TEMPORAL_ADDRESS') });
    const refused = refusedServerVersion((await connection.workflowService.getSystemInfo({})).serverVersion ?? '');
    if (refused) throw new Error(refused);
    const deps = queueWorkerDeps(config, connection, database.db, redis, prebuiltWorkflowBundle());
    if (metrics) watchConnections(metrics, database.pool, redisClients(redis, deps.services.spendRedis));
    const running = await startQueueWorkers(names, deps);
    log.info({ queues: names }, 'worker polling');
    const stop = () => void running.shutdown();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    await running.done;
    await Promise.allSettled([connection.close(), database.close(), redis.close(), deps.services.spendRedis === redis ? undefined : deps.services.spendRedis.close(), ops?.close(), tracing?.shutdown()]);
  } catch (err) {
    // One line at start-up: a bad setting or an unreachable Temporal, not a stack trace.
    console.error(`gw-worker: ${(err as Error).message}`);
    if (!(err instanceof ConfigError)) log.debug({ err }, 'worker failed');
    process.exit(1);
  }
}
