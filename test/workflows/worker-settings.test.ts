import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { downloadsQueue, taskQueue } from '../../workflows/definitions';

/**
 * Issue 34: each queue's worker takes its size from the configuration (GW_WORKER_<QUEUE>_*),
 * a jobs worker serves a downloads queue of its own next to the jobs queue, and a stop waits
 * GW_SHUTDOWN_GRACE_MS for the activities in flight (the SDK's default waits not at all).
 */
describe('worker settings', () => {
  it('sizes each queue\'s worker from the configuration, the jobs worker with its downloads queue apart', async () => {
    const prefix = uniquePrefix('wset');
    const workers = await startTestWorkers(['jobs', 'webhooks'], prefix, {
      GW_WORKER_JOBS_ACTIVITY_SLOTS: '7', GW_WORKER_JOBS_STICKY_CACHE: '50', GW_WORKER_DOWNLOADS_ACTIVITY_SLOTS: '3',
      GW_WORKER_WEBHOOKS_ACTIVITY_SLOTS: '11', GW_WORKER_WEBHOOKS_STICKY_CACHE: '40', GW_SHUTDOWN_GRACE_MS: '1234',
    });
    try {
      const jobsQueue = taskQueue('jobs', prefix);
      const byQueue = new Map(workers.workers.map((w) => [w.options.taskQueue, w.options]));
      expect([...byQueue.keys()].sort()).toEqual([jobsQueue, downloadsQueue(jobsQueue), taskQueue('webhooks', prefix)].sort());
      const slots = (q: string) => (byQueue.get(q)!.tuner as { activityTaskSlotSupplier: { numSlots: number } }).activityTaskSlotSupplier.numSlots;
      expect([slots(jobsQueue), slots(downloadsQueue(jobsQueue)), slots(taskQueue('webhooks', prefix))]).toEqual([7, 3, 11]);
      expect([byQueue.get(jobsQueue)!.maxCachedWorkflows, byQueue.get(taskQueue('webhooks', prefix))!.maxCachedWorkflows]).toEqual([50, 40]);
      // The downloads queue runs activities only: no workflow poller waits there.
      expect(byQueue.get(downloadsQueue(jobsQueue))!.workflowBundle).toBeUndefined();
      for (const options of byQueue.values()) expect(options.shutdownGraceTime).toBe(1234);
    } finally {
      await workers.shutdown();
    }
  });
});
