import { Client, Connection } from '@temporalio/client';
import { ensureMaintenanceSchedules, maintenanceSchedules, MIN_SCHEDULE_INTERVAL_MS } from '../../workers/schedules';
import { REQUEST_LOG_RETENTION_EVERY_MS, scheduleIds, WEBHOOK_SWEEP_EVERY_MS } from '../../workflows/definitions';
import { uniquePrefix } from '../helpers/harness';
import { until } from '../helpers/until';
import { testTemporalClient } from '../helpers/sealing-keys';

/**
 * Issue 34: a scheduled run that is stuck (here: no worker ever takes its first task, as when
 * every maintenance worker is wedged or gone) ends at its run timeout, three intervals, and the
 * schedule starts the next run; without the timeout the overlap policy (skip) would skip every
 * later run for ever. The real schedule options, compressed: a 3 s interval, a 9 s run timeout.
 */
describe('a stuck scheduled run', () => {
  const prefix = uniquePrefix('stuck');
  const scale = 3_000 / WEBHOOK_SWEEP_EVERY_MS;
  let temporal: Client;

  beforeAll(async () => {
    temporal = testTemporalClient(await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! }));
  });
  afterAll(async () => {
    await temporal.schedule.getHandle(scheduleIds.webhookDeliverySweep(prefix)).delete().catch(() => undefined);
    await temporal.connection.close();
  });

  it('times out after three intervals, and the schedule starts the next run', async () => {
    const options = maintenanceSchedules(prefix, scale, 1_000).find((o) => o.scheduleId === scheduleIds.webhookDeliverySweep(prefix))!;
    expect(options.action).toMatchObject({ workflowRunTimeout: 9_000 });
    const handle = await temporal.schedule.create(options);
    const first = await until(async () => (await handle.describe()).info.recentActions[0] ?? null, 'the first run', 20_000, 250);
    const run = temporal.workflow.getHandle(first.action.workflow.workflowId, first.action.workflow.firstExecutionRunId);
    const ended = await until(async () => {
      const status = (await run.describe()).status.name;
      return status === 'RUNNING' ? null : status;
    }, 'the stuck run to end', 30_000, 250);
    expect(ended).toBe('TIMED_OUT');
    // The next run starts once the stuck one has ended: the schedule was skipping until then.
    const next = await until(async () => (await handle.describe()).info.recentActions.find((a) => a.action.workflow.workflowId !== first.action.workflow.workflowId) ?? null, 'the next run', 20_000, 250);
    expect(next.scheduledAt.getTime()).toBeGreaterThan(first.scheduledAt.getTime());
    expect((await handle.describe()).info.numActionsSkippedOverlap).toBeGreaterThan(0);
  });

  it('creates every maintenance schedule at GW_SCHEDULE_SCALE=0.001, none under Temporal\'s one-second minimum', async () => {
    // Scaled, the 5-minute schedules would run every 300 ms, which Temporal refuses
    // ("interval is too small"); `npm start` at 0.001 then stopped at its start (issue 52).
    const scaled = uniquePrefix('scaled');
    const options = maintenanceSchedules(scaled, 0.001);
    try {
      await ensureMaintenanceSchedules(temporal, scaled, 0.001);
      for (const o of options) {
        const every = (await temporal.schedule.getHandle(o.scheduleId).describe()).spec.intervals?.[0]?.every;
        expect(every).toBeGreaterThanOrEqual(MIN_SCHEDULE_INTERVAL_MS);
      }
      // What scales past the minimum keeps its scaled value: the hourly retention, 3.6 s.
      const retention = await temporal.schedule.getHandle(scheduleIds.requestLogRetention(scaled)).describe();
      expect(retention.spec.intervals?.[0]?.every).toBe(REQUEST_LOG_RETENTION_EVERY_MS * 0.001);
    } finally {
      await Promise.all(options.map((o) => temporal.schedule.getHandle(o.scheduleId).delete().catch(() => undefined)));
    }
  });
});
