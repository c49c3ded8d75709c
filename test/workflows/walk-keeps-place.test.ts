import { Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createFindingsActivities } from '../../activities/findings';
import { createWalkActivities } from '../../activities/walks';
import { systemClock } from '../../core/clock';
import type { DatabaseHandle } from '../../core/db/client';
import { walkCursors } from '../../core/db/schema';
import type { FindingsScanResult } from '../../workflows/definitions';
import { installTemporalRuntime } from '../../workers/temporal';
import { isolatedDatabase, uniquePrefix } from '../helpers/harness';
import { testDataConverter, testTemporalClient } from '../helpers/sealing-keys';
import { createTenant } from '../helpers/tenants';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Each page of one organization takes this long; a run may last a little over two of them. */
const PAGE_MS = 1_500;
const RUN_TIMEOUT_MS = 4_000;
const ORGANIZATIONS = 5;

/**
 * A scheduled walk keeps its place when a run times out (issue 55, item 5): one slow page used
 * most of a detector's 15 minutes and the organizations after it were never scanned, since each
 * run started again from the first. Here every page is slow, runs time out after two pages, and
 * successive runs still reach every organization. The walk runs on a database of its own, so
 * the organizations of other test files are not in it.
 */
describe('a scheduled walk that times out goes on where it stopped', () => {
  const prefix = uniquePrefix('walk');
  const taskQueue = `${prefix}walk`;
  let isolated: Awaited<ReturnType<typeof isolatedDatabase>>;
  let db: DatabaseHandle;
  let orgIds: string[];
  const scanned: string[] = [];

  beforeAll(async () => {
    isolated = await isolatedDatabase('walk');
    db = isolated.db;
    orgIds = [];
    for (let i = 0; i < ORGANIZATIONS; i++) orgIds.push((await createTenant(db.db)).orgId);
    orgIds.sort();
    try {
      installTemporalRuntime('warn');
    } catch {
      // Already installed by an earlier test file in this Jest worker process.
    }
  });
  afterAll(async () => {
    await isolated?.drop();
  });

  it('reaches every organization over runs that each time out, then clears its place', async () => {
    const real = createFindingsActivities({ db: db.db, clock: systemClock, settings: undefined as never, publicUrl: 'https://gw.test', startDeliveries: async () => undefined });
    const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    const worker = await Worker.create({
      connection, taskQueue, workflowBundle: { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! }, dataConverter: testDataConverter(),
      activities: {
        listOrganizationPage: real.listOrganizationPage,
        // The slow page: what a tenant with much data costs the detector (its work is not the point here).
        async runFindingDetectorPage(input: { orgIds: string[] }) {
          await sleep(PAGE_MS);
          scanned.push(...input.orgIds);
          return { detections: 0, opened: 0, raised: 0, resolved: 0, notified: 0 };
        },
        ...createWalkActivities({ db: db.db }),
      },
    });
    const client = testTemporalClient(await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! }));
    const outcomes: string[] = [];
    await worker.runUntil(async () => {
      // As the schedule starts them: one run after another, each with its own id and timeout.
      for (let run = 0; run < 4 && !outcomes.includes('completed'); run++) {
        const handle = await client.workflow.start('findingsScan', {
          taskQueue, workflowId: `${prefix}run-${run}`, args: [{ detector: 'spend-anomaly', orgPageSize: 1 }], workflowRunTimeout: RUN_TIMEOUT_MS,
        });
        outcomes.push(await handle.result().then((r: FindingsScanResult) => (r ? 'completed' : 'none'), () => 'timed out'));
      }
    });
    await connection.close();
    // Runs timed out, and still every organization was scanned, the last by a run that completed.
    expect(outcomes[0]).toBe('timed out');
    expect(outcomes.at(-1)).toBe('completed');
    expect(new Set(scanned)).toEqual(new Set(orgIds));
    // The walk reached its end: the next run starts from the first organization.
    expect(await db.db.select().from(walkCursors)).toEqual([]);
  }, 90_000);
});
