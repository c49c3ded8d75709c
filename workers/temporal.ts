import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type WorkerOptions } from '@temporalio/worker';
import path from 'node:path';

/**
 * The workflow sources, which `npm start`, the tests and `npm run build` bundle. A path, not
 * `require.resolve`: the compiled workers load this module from dist/, where no workflows/
 * folder exists (they run the bundle built ahead, workers/main.ts), and a `require.resolve`
 * would throw as the module loads.
 */
export const WORKFLOWS_PATH = path.resolve(__dirname, '..', 'workflows', 'index.ts');

/**
 * Once per process: the SDK logs at our level, and leaves signals to our own handlers so that
 * shutdown runs in the order the process chooses.
 */
export function installTemporalRuntime(level: string): void {
  const sdkLevel: LogLevel = level === 'debug' || level === 'trace' ? 'DEBUG' : level === 'info' ? 'INFO' : 'WARN';
  Runtime.install({ logger: new DefaultLogger(sdkLevel), shutdownSignals: [] });
}

export type WorkerSpec = {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: object;
  workflowBundle: NonNullable<WorkerOptions['workflowBundle']>;
};

export async function createWorker(spec: WorkerSpec): Promise<Worker> {
  return Worker.create({
    connection: spec.connection,
    namespace: spec.namespace,
    taskQueue: spec.taskQueue,
    activities: spec.activities,
    workflowBundle: spec.workflowBundle,
  });
}
