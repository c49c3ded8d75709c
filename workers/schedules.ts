import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import { scaleDuration } from '../core/schedule';
import { MCP_TOOL_SYNC_EVERY_MS, REQUEST_LOG_RETENTION_EVERY_MS, scheduleIds, taskQueue, WEBHOOK_SWEEP_EVERY_MS } from '../workflows/definitions';

/**
 * The Temporal Schedules of the maintenance queue (DESIGN 6.10: periodic work is a schedule,
 * visible in the Temporal UI, never a timer in the API). Made or brought up to date by every
 * maintenance worker as it starts, so a deploy that changes a schedule's spec applies it.
 */
export function maintenanceSchedules(taskQueuePrefix: string, scheduleScale: number): ScheduleOptions[] {
  const retentionId = scheduleIds.requestLogRetention(taskQueuePrefix);
  const mcpSyncId = scheduleIds.mcpToolSync(taskQueuePrefix);
  const sweepId = scheduleIds.webhookDeliverySweep(taskQueuePrefix);
  return [
    {
      scheduleId: retentionId,
      spec: { intervals: [{ every: scaleDuration(REQUEST_LOG_RETENTION_EVERY_MS, scheduleScale) }] },
      action: {
        type: 'startWorkflow',
        workflowType: 'requestLogRetention',
        // Temporal appends the scheduled time: `gw-request-log-retention-2026-11-22T10:00:00Z`.
        workflowId: retentionId,
        taskQueue: taskQueue('maintenance', taskQueuePrefix),
        args: [],
      },
      // A run still clearing a backlog is not joined by the next one; a missed hour is not replayed.
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
      memo: { purpose: 'request log: expired prompt and answer bodies, day partitions; expired media files' },
    },
    {
      scheduleId: mcpSyncId,
      spec: { intervals: [{ every: scaleDuration(MCP_TOOL_SYNC_EVERY_MS, scheduleScale) }] },
      action: {
        type: 'startWorkflow',
        workflowType: 'mcpToolSync',
        workflowId: mcpSyncId,
        taskQueue: taskQueue('maintenance', taskQueuePrefix),
        args: [],
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
      memo: { purpose: 'tool gateway: re-list every active MCP server, mark changed tools, record health, raise mcp.* alerts' },
    },
    {
      scheduleId: sweepId,
      spec: { intervals: [{ every: scaleDuration(WEBHOOK_SWEEP_EVERY_MS, scheduleScale) }] },
      action: {
        type: 'startWorkflow',
        workflowType: 'webhookDeliverySweep',
        workflowId: sweepId,
        taskQueue: taskQueue('maintenance', taskQueuePrefix),
        args: [],
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
      memo: { purpose: 'webhooks: start the workflow of every delivery (job or alert event) left pending and never attempted after a failed start' },
    },
  ];
}

/** Creates each schedule, or updates it in place if it exists (several workers may start at once). */
export async function ensureMaintenanceSchedules(client: Client, taskQueuePrefix: string, scheduleScale: number): Promise<void> {
  for (const options of maintenanceSchedules(taskQueuePrefix, scheduleScale)) {
    try {
      await client.schedule.create(options);
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      await client.schedule.getHandle(options.scheduleId).update((previous) => ({
        ...previous,
        spec: options.spec,
        action: options.action,
        policies: { ...previous.policies, ...options.policies },
      }));
    }
  }
}
