import { Client, Connection } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { and, eq, inArray } from 'drizzle-orm';
import { createFindingsActivities } from '../../activities/findings';
import { createWalkActivities } from '../../activities/walks';
import { fixedClock } from '../../core/clock';
import { findings, usageHourly } from '../../core/db/schema';
import { ANOMALY_DOLLAR_FLOOR } from '../../core/findings/scan';
import { taskQueue, type FindingsScanResult } from '../../workflows/definitions';
import { installTemporalRuntime, workflowSpanSink } from '../../workers/temporal';
import { testDatabase, uniquePrefix } from '../helpers/harness';
import { createTenant, type Tenant } from '../helpers/tenants';
import { testDataConverter, testTemporalClient } from '../helpers/sealing-keys';

const HOUR_MS = 3_600_000;

/**
 * Issue 34: a detector's run pages through organizations, one activity per page, so a tenant
 * whose page fails (its data too much for the activity's time, a row that breaks a detector)
 * fails its page only: the organizations on every other page still get their findings, and the
 * run reports the failed page. The activities are the real ones on the real database, run by a
 * worker of the test's own; the page holding one tenant is made to fail as a timed-out query would.
 */
describe('findings scan pages through organizations', () => {
  const prefix = uniquePrefix('fpage');
  const queue = taskQueue('maintenance', prefix);
  const database = testDatabase();
  const now = new Date();
  const target = new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - HOUR_MS);
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  let temporal: Client;
  const tenants: Tenant[] = [];
  let poisoned: Tenant;

  /** Four weeks of ordinary hours, then a $60 hour: one spend.anomaly for the tenant's key. */
  async function spike(t: Tenant): Promise<void> {
    const rows: Array<typeof usageHourly.$inferInsert> = [];
    for (let h = 28 * 24; h >= 1; h--) {
      rows.push({ orgId: t.orgId, hour: new Date(target.getTime() - h * HOUR_MS), keyId: t.key.id, projectId: t.projectId, model: 'gpt-4o-mini', provider: 'openai', requests: 30, cost: 1 + ((h * 7) % 5) / 10 });
    }
    rows.push({ orgId: t.orgId, hour: target, keyId: t.key.id, projectId: t.projectId, model: 'gpt-4o-mini', provider: 'openai', requests: 400, cost: 60 });
    await database.db.insert(usageHourly).values(rows);
  }

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) tenants.push(await createTenant(database.db));
    poisoned = tenants[1]!;
    for (const t of tenants) await spike(t);
    try {
      installTemporalRuntime('warn');
    } catch {
      // Already installed in this Jest worker process.
    }
    connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    const real = createFindingsActivities({
      db: database.db, clock: fixedClock(now), publicUrl: 'https://gw.test', startDeliveries: async () => undefined,
      settings: { anomalyDollarFloor: ANOMALY_DOLLAR_FLOOR, everyMs: 300_000, catalog: () => Promise.reject(new Error('unused')) },
    });
    worker = await Worker.create({
      connection, taskQueue: queue, workflowBundle: { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! }, dataConverter: testDataConverter(), sinks: workflowSpanSink(),
      activities: {
        ...real,
        // The walk's end (issue 55): its cursor kept in this test's database.
        ...createWalkActivities({ db: database.db }),
        async runFindingDetectorPage(input: Parameters<typeof real.runFindingDetectorPage>[0]) {
          if (input.orgIds.includes(poisoned.orgId)) throw ApplicationFailure.create({ message: 'canceling statement due to statement timeout' });
          return real.runFindingDetectorPage(input);
        },
      },
    });
    running = worker.run();
    temporal = testTemporalClient(await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! }));
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await temporal?.connection.close();
    await connection?.close();
    await database.close();
  });

  it('gives every other page its findings when one tenant\'s page fails, one activity per page', async () => {
    const handle = await temporal.workflow.start('findingsScan', { taskQueue: queue, workflowId: `${prefix}scan`, args: [{ detector: 'spend-anomaly', orgPageSize: 1 }] });
    const result = (await handle.result()) as Required<FindingsScanResult>;
    // Every organization in the test database is a page of one; the poisoned tenant's failed all three attempts.
    expect(result.failedPages).toBe(1);
    expect(result.pages).toBeGreaterThanOrEqual(tenants.length);
    // What this run recorded (seen at its time; other test files' scans may see these tenants too).
    const opened = await database.db.select({ orgId: findings.orgId }).from(findings)
      .where(and(eq(findings.type, 'spend.anomaly'), inArray(findings.orgId, tenants.map((t) => t.orgId)), eq(findings.lastSeenAt, now)));
    expect(new Set(opened.map((f) => f.orgId))).toEqual(new Set([tenants[0]!.orgId, tenants[2]!.orgId]));

    const history = await handle.fetchHistory();
    const pages = history.events!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runFindingDetectorPage');
    expect(pages).toHaveLength(result.pages);
    expect(pages[0]!.activityTaskScheduledEventAttributes!.heartbeatTimeout).toBeTruthy();
  });
});
