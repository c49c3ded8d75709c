import { randomBytes } from 'node:crypto';
import { Connection } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { createJobSweepActivities } from '../../activities/job-sweep';
import { systemClock } from '../../core/clock';
import type { DatabaseHandle } from '../../core/db/client';
import { jobs } from '../../core/db/schema';
import { createLinkSigner } from '../../core/jobs/output-links';
import { newId } from '../../core/ids';
import { isolatedDatabase, testRedis, uniquePrefix } from '../helpers/harness';
import { testTemporalClient } from '../helpers/sealing-keys';
import { createTenant, type Tenant } from '../helpers/tenants';

/**
 * Jobs whose workflow is gone are ended by the sweep (issue 55, item 8): a job left queued by a
 * start that never happened ends `failed`; a job whose workflow runs is left alone. On a
 * database of its own, so the sweep sees no other test file's jobs.
 */
describe('the job sweep', () => {
  const prefix = uniquePrefix('jsweep');
  let isolated: Awaited<ReturnType<typeof isolatedDatabase>>;
  let db: DatabaseHandle;
  let tenant: Tenant;
  const redis = testRedis();

  beforeAll(async () => {
    isolated = await isolatedDatabase('jsweep');
    db = isolated.db;
    tenant = await createTenant(db.db);
  });
  afterAll(async () => {
    await isolated?.drop();
    await redis.close();
  });

  it('ends a job whose workflow never started, leaves one whose workflow runs and a recent one', async () => {
    const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    const temporal = testTemporalClient(connection);
    const [orphan, tracked, recent] = [newId('job'), newId('job'), newId('job')];
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (const [id, at] of [[orphan, hourAgo], [tracked, hourAgo], [recent, new Date()]] as const) {
      await db.db.insert(jobs).values({ id, orgId: tenant.orgId, keyId: tenant.key.id, lineageId: tenant.key.id, projectId: tenant.projectId, type: 'video.generation', status: 'queued', model: 'openai/sora-2', request: {}, createdAt: at, updatedAt: at });
    }
    // Its workflow runs (no worker polls its queue).
    const handle = await temporal.workflow.start('videoJob', { workflowId: tracked, taskQueue: `${prefix}nobody-polls`, args: [{ jobId: tracked }] });
    try {
      const sweep = createJobSweepActivities({ db: db.db, clock: systemClock, temporal, spendRedis: redis.redis, links: { signer: createLinkSigner(randomBytes(32)), baseUrl: 'https://gw.test' }, startDeliveries: async () => undefined });
      expect(await sweep.endOrphanedJobs()).toEqual({ checked: 2, ended: 1 });
      const statusOf = async (id: string) => (await db.db.select().from(jobs).where(eq(jobs.id, id)))[0]!;
      expect(await statusOf(orphan)).toMatchObject({ status: 'failed', error: { type: 'internal_error' } });
      expect((await statusOf(orphan)).error!.message).toMatch(/stopped being tracked/);
      expect((await statusOf(tracked)).status).toBe('queued');
      expect((await statusOf(recent)).status).toBe('queued');
      // Once ended, a job is not looked at again.
      expect(await sweep.endOrphanedJobs()).toEqual({ checked: 1, ended: 0 });
    } finally {
      await handle.terminate('test over');
      await connection.close();
    }
  });
});
