import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type WorkerOptions } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';

export const WORKFLOWS_PATH = require.resolve('../workflows');

export async function connectClient(address: string, namespace: string): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address });
  return { client: new Client({ connection, namespace }), close: () => connection.close() };
}

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

/** Readiness: a queue is served when some worker has polled it recently. */
export async function queueHasPollers(client: Client, taskQueue: string): Promise<boolean> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (response.pollers ?? []).length > 0;
}
