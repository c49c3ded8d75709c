import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { taskQueue, type TaskQueueName } from '../../workflows/definitions';
import { testTemporalClient } from './sealing-keys';

const ROOT = path.resolve(__dirname, '../..');
const ENTRY: Record<TaskQueueName, string> = { jobs: 'workers/jobs.ts', webhooks: 'workers/webhooks.ts', maintenance: 'workers/maintenance.ts' };

export type WorkerProcess = { child: ChildProcess; kill(): Promise<void>; stop(): Promise<void> };

/**
 * A queue's worker as its own process (`npm run worker:<queue>`), so a test can kill it the
 * way a machine dies: SIGKILL, no graceful shutdown. It uses the run's prebuilt workflow bundle.
 */
export async function startWorkerProcess(queue: TaskQueueName, prefix: string, env: Record<string, string> = {}): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', ENTRY[queue]], {
    cwd: ROOT,
    env: { ...process.env, GW_TASK_QUEUE_PREFIX: prefix, GW_WORKFLOW_BUNDLE: process.env.GW_TEST_WORKFLOW_BUNDLE!, LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Ready when this process polls the queue for activities: a killed worker's poller stays
  // listed for a while, so the count alone proves nothing.
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  const client = testTemporalClient(connection);
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`worker exited: ${stderr.trim().split('\n').pop() ?? ''}`);
      const response = await client.workflowService.describeTaskQueue({
        namespace: 'default',
        taskQueue: { name: taskQueue(queue, prefix), kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
        taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
      });
      if ((response.pollers ?? []).some((p) => p.identity?.startsWith(`${child.pid}@`))) break;
      if (Date.now() > deadline) throw new Error(`worker never polled: ${stderr}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await connection.close();
  }
  return {
    child,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
