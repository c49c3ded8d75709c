import type { Context as ActivityContext } from '@temporalio/activity';
import { ScrubActivityErrors } from './activity-errors';
import { makeWorkflowExporter, OpenTelemetryActivityInboundInterceptor, OpenTelemetryActivityOutboundInterceptor } from '@temporalio/interceptors-opentelemetry/lib/worker';
import type { OpenTelemetryWorkflowExporter } from '@temporalio/interceptors-opentelemetry/lib/workflow/definitions';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker, type BundleOptions, type InjectedSinks, type LogEntry, type LogLevel, type WorkerOptions } from '@temporalio/worker';
import path from 'node:path';
import { inspect } from 'node:util';
import { processTracingSetup } from '../core/observability/tracing';

/**
 * The workflow sources, which `npm start`, the tests and `npm run build` bundle. A path, not
 * `require.resolve`: the compiled workers load this module from dist/, where no workflows/
 * folder exists (they run the bundle built ahead, workers/main.ts), and a `require.resolve`
 * would throw as the module loads.
 */
export const WORKFLOWS_PATH = path.resolve(__dirname, '..', 'workflows', 'index.ts');

/**
 * The OpenTelemetry workflow interceptors, in every bundle whether traces are on or not: a bundle
 * is built ahead (`npm run build`) and must serve either way. They issue no commands, so
 * histories replay the same with or without them. With traces off their spans go to a sink that
 * drops them (`workflowSpanSink`).
 */
const WORKFLOW_INTERCEPTOR_MODULES = [require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')];

/**
 * The oldest Temporal server the workers run on: status checks and webhook attempts wait out
 * their schedule through `nextRetryDelay` on an activity failure, and a server before 1.25
 * caps such a delay at the retry policy's maximum interval (one minute), which would compress
 * a delivery's 8-hour gaps into minutes (issue 55).
 */
export const MIN_TEMPORAL_SERVER_VERSION = [1, 25, 0] as const;

/** Why a worker refuses the server it connected to (one line), or null to go on. */
export function refusedServerVersion(version: string): string | null {
  const parts = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  const wanted = MIN_TEMPORAL_SERVER_VERSION.join('.');
  if (!parts) return `the Temporal server did not say its version ("${version}"); the workers need ${wanted} or later`;
  const [major, minor, patch] = parts.slice(1).map(Number) as [number, number, number];
  const [M, m, p] = MIN_TEMPORAL_SERVER_VERSION;
  const older = major !== M ? major < M : minor !== m ? minor < m : patch < p;
  return older ? `the Temporal server is ${major}.${minor}.${patch}; the workers need ${wanted} or later (schedules ride nextRetryDelay past one minute)` : null;
}

/**
 * The failure converter every worker and its workflow bundle take by path: failures' messages
 * sealed (core/crypto/failure-converter.cjs). From the sources it is that file; from dist/ the
 * same place under dist/, where scripts/build.ts copies it.
 */
export const FAILURE_CONVERTER_PATH = path.resolve(__dirname, '..', 'core', 'crypto', 'failure-converter.cjs');

/** The workflow bundle every worker runs, built the one way (workers, tests, `npm run build`, replay). */
export function bundleGatewayWorkflows(logger: BundleOptions['logger']): ReturnType<typeof bundleWorkflowCode> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES, failureConverterPath: FAILURE_CONVERTER_PATH, logger });
}

/**
 * Where the bundled workflow interceptors' spans go: the process's span pipeline, or nowhere.
 * Every worker, replaying ones included, registers it: the bundle calls it whether or not traces are on.
 */
export function workflowSpanSink(): InjectedSinks<{ exporter: OpenTelemetryWorkflowExporter }> {
  const tracing = processTracingSetup();
  return { exporter: tracing ? makeWorkflowExporter(tracing.spanProcessor, tracing.resource) : { export: { fn: () => undefined } } };
}

/**
 * Once per process: the SDK logs at our level, and leaves signals to our own handlers so that
 * shutdown runs in the order the process chooses. With `metricsAddress` (`host:port`) the SDK's
 * own worker metrics (task latencies, schedule-to-start, sticky cache, slots) are served there
 * for Prometheus by its core, named as Prometheus names things (`_total`, units, seconds).
 */
export function installTemporalRuntime(level: string, metricsAddress?: string): void {
  const sdkLevel: LogLevel = level === 'debug' || level === 'trace' ? 'DEBUG' : level === 'info' ? 'INFO' : 'WARN';
  Runtime.install({
    logger: new DefaultLogger(sdkLevel, sdkLogLine),
    shutdownSignals: [],
    ...(metricsAddress && {
      telemetryOptions: { metrics: { prometheus: { bindAddress: metricsAddress, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true } } },
    }),
  });
}

/**
 * The SDK's lines as its default logger writes them, less one: the jobs worker's downloads
 * queue runs activities only by design, and the SDK warns about that at every start.
 */
const ACTIVITIES_ONLY_WARNING = 'No workflows registered, not polling for workflow tasks';
function sdkLogLine(entry: LogEntry): void {
  if (entry.message === ACTIVITIES_ONLY_WARNING) return;
  const { level, timestampNanos, message, meta } = entry;
  const at = new Date(Number(timestampNanos / 1_000_000n)).toISOString();
  process.stderr.write(meta === undefined ? `${at} [${level}] ${message}\n` : `${at} [${level}] ${message} ${inspect(meta)}\n`);
}

export type WorkerSpec = {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: object;
  /** Absent for a queue of activities only (the jobs worker's downloads). */
  workflowBundle?: NonNullable<WorkerOptions['workflowBundle']>;
  /** Seals and opens payloads (core/crypto/payload-codec.ts). */
  dataConverter: NonNullable<WorkerOptions['dataConverter']>;
  /**
   * Activities at once, workflows kept cached, how long a stop waits for activities in flight,
   * and the share of workflow pollers on the queue's own (not sticky) task queue, where every new
   * workflow's first task arrives.
   */
  settings: { activitySlots: number; stickyCache: number; shutdownGraceMs: number; newWorkflowShare: number };
};

export async function createWorker(spec: WorkerSpec): Promise<Worker> {
  const cache = spec.workflowBundle
    ? { workflowBundle: spec.workflowBundle, maxCachedWorkflows: spec.settings.stickyCache, nonStickyToStickyPollRatio: spec.settings.newWorkflowShare }
    : {};
  return Worker.create({
    connection: spec.connection,
    namespace: spec.namespace,
    taskQueue: spec.taskQueue,
    activities: spec.activities,
    dataConverter: spec.dataConverter,
    ...cache,
    sinks: workflowSpanSink(),
    interceptors: {
      activity: [
        // With traces on, each activity is a span of its workflow's trace.
        ...(processTracingSetup() ? [(ctx: ActivityContext) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx), outbound: new OpenTelemetryActivityOutboundInterceptor(ctx) })] : []),
        // Innermost: database errors lose their statement and values before anything sees them.
        () => ({ inbound: new ScrubActivityErrors() }),
      ],
    },
    maxConcurrentActivityTaskExecutions: spec.settings.activitySlots,
    // The SDK's default is 0: a deploy's SIGTERM would cancel every submit, delivery and
    // download in flight. They get the grace the API gives its requests, then are cancelled.
    shutdownGraceTime: spec.settings.shutdownGraceMs,
  });
}
