import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import { scaleDuration } from '../core/schedule';
import { DETECTORS } from '../core/findings/scan';
import { FINDINGS_SCAN_EVERY_MS, MCP_TOOL_SYNC_EVERY_MS, REQUEST_LOG_RETENTION_EVERY_MS, scheduleIds, taskQueue, WEBHOOK_SWEEP_EVERY_MS } from '../workflows/definitions';

/** A scheduled run may last this many of its intervals before it is ended (issue 34). */
export const SCHEDULED_RUN_TIMEOUT_INTERVALS = 3;
/** ...and never less than this, however compressed the schedule: a run's activities take real time. */
export const MIN_SCHEDULED_RUN_TIMEOUT_MS = 60_000;

/**
 * Temporal refuses a schedule interval under one second ("interval is too small"), so a
 * compressed schedule (GW_SCHEDULE_SCALE=0.001 makes 5 minutes 300 ms) runs at most once a second.
 * Only the schedules are held to it: webhook and status-check delays are durable timers and
 * retries, which keep their scaled values.
 */
export const MIN_SCHEDULE_INTERVAL_MS = 1_000;

/** A schedule's interval: `everyMs` times the scale, at least what Temporal accepts. */
export function scheduleIntervalMs(everyMs: number, scheduleScale: number): number {
  return Math.max(MIN_SCHEDULE_INTERVAL_MS, scaleDuration(everyMs, scheduleScale));
}

/** How long one run of a schedule every `everyMs` (times the scale) may last, at least `floorMs`. */
export function scheduledRunTimeoutMs(everyMs: number, scheduleScale: number, floorMs = MIN_SCHEDULED_RUN_TIMEOUT_MS): number {
  return Math.max(floorMs, scaleDuration(everyMs * SCHEDULED_RUN_TIMEOUT_INTERVALS, scheduleScale));
}

/**
 * The Temporal Schedules of the maintenance queue (DESIGN 6.10: periodic work is a schedule,
 * visible in the Temporal UI, never a timer in the API). Made or brought up to date by every
 * maintenance worker as it starts, so a deploy that changes a schedule's spec applies it.
 */
export function maintenanceSchedules(taskQueuePrefix: string, scheduleScale: number, minRunTimeoutMs = MIN_SCHEDULED_RUN_TIMEOUT_MS): ScheduleOptions[] {
  /**
   * One schedule on the maintenance queue: a workflow with no arguments every `everyMs` (times
   * the scale). A run still going is not joined by the next one; a missed run is not replayed.
   * Temporal appends the scheduled time to the workflow id (`gw-request-log-retention-2026-...`).
   */
  const every = (scheduleId: string, everyMs: number, workflowType: string, purpose: string, args: unknown[] = []): ScheduleOptions => ({
    scheduleId,
    spec: { intervals: [{ every: scheduleIntervalMs(everyMs, scheduleScale) }] },
    action: {
      type: 'startWorkflow', workflowType, workflowId: scheduleId, taskQueue: taskQueue('maintenance', taskQueuePrefix), args,
      // A stuck run (an activity retrying forever, a lost worker's task) ends here, so the
      // next one is not skipped for ever by the overlap policy.
      workflowRunTimeout: scheduledRunTimeoutMs(everyMs, scheduleScale, minRunTimeoutMs),
    },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
    memo: { purpose },
  });
  return [
    every(scheduleIds.requestLogRetention(taskQueuePrefix), REQUEST_LOG_RETENTION_EVERY_MS, 'requestLogRetention',
      'request log: expired prompt and answer bodies, day partitions; expired media files'),
    every(scheduleIds.mcpToolSync(taskQueuePrefix), MCP_TOOL_SYNC_EVERY_MS, 'mcpToolSync',
      'tool gateway: re-list every active MCP server, mark changed tools, record health, raise mcp.* alerts'),
    every(scheduleIds.webhookDeliverySweep(taskQueuePrefix), WEBHOOK_SWEEP_EVERY_MS, 'webhookDeliverySweep',
      'webhooks: start the workflow of every delivery (job or alert event) left pending and never attempted after a failed start'),
    ...DETECTORS.map((d) => every(scheduleIds.findingsScan(d.name, taskQueuePrefix), FINDINGS_SCAN_EVERY_MS, 'findingsScan',
      `findings: ${d.types.join(', ')} over the rollups and request log; record, resolve, notify`, [{ detector: d.name }])),
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
