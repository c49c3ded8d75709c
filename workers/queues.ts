import { bundleWorkflowCode, NativeConnection, type Worker } from '@temporalio/worker';
import { createProbeActivities } from '../activities/probe';
import { taskQueue, type TaskQueueName } from '../workflows/definitions';
import { createWorker, WORKFLOWS_PATH, type WorkerSpec } from './temporal';

export type QueueWorkerDeps = {
  connection: NativeConnection;
  namespace: string;
  taskQueuePrefix: string;
  workflowBundle?: WorkerSpec['workflowBundle'];
};

/** The activities each task queue's workers serve, built from real dependencies. */
function activitiesFor(_name: TaskQueueName, queue: string): object {
  return { ...createProbeActivities({ taskQueue: queue }) };
}

const noop = () => undefined;
/** webpack's build report is noise in a worker's log; failures still throw. */
export const quietBundlerLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

export type RunningWorkers = { workers: Worker[]; done: Promise<void>; shutdown(): Promise<void> };

/** Starts one worker per named queue and keeps them polling until shutdown. */
export async function startQueueWorkers(names: readonly TaskQueueName[], deps: QueueWorkerDeps): Promise<RunningWorkers> {
  // Every queue's worker runs the same workflow code: bundle it once, not once per queue.
  const workflowBundle = deps.workflowBundle ?? (await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietBundlerLogger }));
  const workers = await Promise.all(
    names.map((name) => {
      const queue = taskQueue(name, deps.taskQueuePrefix);
      return createWorker({
        connection: deps.connection,
        namespace: deps.namespace,
        taskQueue: queue,
        activities: activitiesFor(name, queue),
        workflowBundle,
      });
    }),
  );
  const done = Promise.all(workers.map((w) => w.run())).then(() => undefined);
  return {
    workers,
    done,
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await done;
    },
  };
}
