import v8 from 'node:v8';
import { ConfigError, loadConfig } from '../core/config';
import { createLogger } from '../core/logger';
import { describeOpsServer, startConfiguredOpsServer } from '../core/observability/metrics';
import { startTracing } from '../core/observability/tracing';
import { createApp } from './app';
import { listen } from './listen';
import { startApiRuntime } from './runtime';

/**
 * How much the old generation may grow past what the last full collection left, in percent.
 * V8 lets a small heap grow to several times its live size first: with about 45 MB live, the API
 * stood at 250-290 MB RSS after load. Half again keeps it near 170 MB, for no CPU difference
 * the bench could tell apart from noise (bench/results/2026-11-26-issue-21-*.md). A V8 flag that
 * `NODE_OPTIONS` refuses, so it is set here, before the heap grows. The young generation's cap
 * (`--max-semi-space-size=16`) cannot be: V8 sizes it when the heap is made, so it is on the node
 * command line of `npm run api` (package.json; Node 24 otherwise grows it to 134 MB, issue 53).
 */
const HEAP_GROWING_PERCENT = 50;

/** Production entry of the API process. It keeps no state of its own: run as many as needed. */
async function main(): Promise<void> {
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  const log = createLogger(process.env.LOG_LEVEL, 'gw-api');
  try {
    const config = loadConfig();
    // Before the runtime: its Temporal client and the request middleware look for a tracer once.
    const tracing = startTracing('gw-api', { context: 'sync' });
    if (tracing) log.info('exporting traces (OTEL_* settings)');
    const runtime = await startApiRuntime(config, log);
    const http = await listen(createApp(runtime.deps), config.PORT, config.HOST);
    log.info({ port: http.port }, `API listening on http://localhost:${http.port}`);
    // Prometheus scrapes the ops port, never the public one.
    const ops = runtime.metrics ? await startConfiguredOpsServer(runtime.metrics.registry, config) : null;
    if (ops) {
      const { message, warning } = describeOpsServer(ops, config);
      log.info({ port: ops.port, address: ops.address }, message);
      if (warning) log.warn(warning);
    }
    // Stop accepting, let requests under way answer, wait for model calls to settle and log,
    // flush the writers, then close (each step bounded by GW_SHUTDOWN_GRACE_MS).
    const stop = async () => {
      await http.close(config.GW_SHUTDOWN_GRACE_MS);
      await runtime.close();
      await ops?.close();
      await tracing?.shutdown();
    };
    process.once('SIGINT', () => void stop());
    process.once('SIGTERM', () => void stop());
  } catch (err) {
    console.error(`gw-api: ${(err as Error).message}`);
    if (!(err instanceof ConfigError)) log.debug({ err }, 'start-up failed');
    process.exit(1);
  }
}

void main();
