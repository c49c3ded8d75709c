import { eq } from 'drizzle-orm';
import { deliveryStartOptions, startDeliveryWorkflow } from '../../activities/webhook-dispatch';
import { newId } from '../../core/ids';
import { jobs, webhookDeliveries } from '../../core/db/schema';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { uniquePrefix } from '../helpers/harness';
import { createLocalCa, type LocalCa } from '../helpers/local-ca';
import { startCuttableProxy, type CuttableProxy } from '../helpers/cuttable-proxy';
import { until } from '../helpers/until';
import { videoClient } from '../helpers/video-client';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/** Schedules (and the retries after our own errors) compressed: the infra backoff is 10-12 ms here. */
const SCALE = 0.0002;

/** The limits the retry policies had before issue 55: 3 per planned delivery attempt, 30 past the 60 checks. */
const OLD_DELIVERY_ATTEMPTS = 12 * 3;
const OLD_CHECK_ATTEMPTS = 60 + 30;

/**
 * Our own errors do not spend the spec's schedules (issue 55, item 3): with the worker's
 * Postgres cut (a TCP proxy between them), a delivery and a status check retry on their own
 * backoff, far past the attempt limits their policies had, and spend nothing: once Postgres is
 * back the delivery lands on its first attempt and the job finishes on its checks.
 */
describe('infrastructure errors spend no attempt of a schedule', () => {
  const prefix = uniquePrefix('infra');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true' };
  let f: ChatFixture;
  let proxy: CuttableProxy;
  let ca: LocalCa;
  let receiver: WebhookReceiver;
  let worker: WorkerProcess | null = null;

  beforeAll(async () => {
    ca = createLocalCa();
    receiver = await startWebhookReceiver(ca);
    f = await startChatFixture(env);
    proxy = await startCuttableProxy(Number(new URL(process.env.DATABASE_URL!).port || 5432));
  });
  afterAll(async () => {
    await worker?.stop();
    await proxy.close();
    await receiver.close();
    await f.close();
  });

  /** The pending activity's attempt number, once it has one. */
  async function pendingAttempt(workflowId: string): Promise<number> {
    const { raw } = await f.api.runtime.temporal.workflow.getHandle(workflowId).describe();
    return raw.pendingActivities?.[0]?.attempt ?? 0;
  }

  it('a delivery retried past its old limit while Postgres is away lands on its first attempt', async () => {
    worker = await startWorkerProcess('webhooks', prefix, { ...env, DATABASE_URL: proxy.url(process.env.DATABASE_URL!), NODE_EXTRA_CA_CERTS: ca.caFile });
    try {
      const eventId = newId('evt');
      const id = `whd_${eventId}`;
      const path = `/infra-${eventId}`;
      await f.database.db.insert(webhookDeliveries).values({ id, orgId: f.tenant.orgId, eventId, eventType: 'job.succeeded', endpointId: null, receiver: 'request', url: receiver.url(path), payload: JSON.stringify({ id: eventId, type: 'job.succeeded', data: {} }) });
      proxy.cut();
      await startDeliveryWorkflow(f.api.runtime.temporal, deliveryStartOptions(prefix, SCALE), { id, orgId: f.tenant.orgId, eventId, eventType: 'job.succeeded', endpointId: null });
      await until(async () => (await pendingAttempt(id)) > OLD_DELIVERY_ATTEMPTS, 'the delivery retrying past its old limit', 60_000, 200);
      proxy.restore();
      const [row] = await until(async () => {
        const rows = await f.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, id));
        return rows[0]?.status === 'succeeded' ? rows : null;
      }, 'the delivery landing', 60_000);
      expect(row).toMatchObject({ status: 'succeeded', attempts: 1, lastResponseStatus: 200 });
      expect(receiver.received(path)).toHaveLength(1);
    } finally {
      proxy.restore();
      await worker.stop();
      worker = null;
    }
  });

  it('a status check slowed by a row lock past the heartbeat timeout is not taken for a lost worker (issue 55, item 8)', async () => {
    await f.connect('openai', { name: 'videos locked' });
    const secret = await f.key({ rate_limit_rpm: 50000 });
    const { submit, until: untilJob, terminal } = videoClient(() => f, () => secret);
    worker = await startWorkerProcess('jobs', prefix, env);
    const locker = await f.database.pool.connect();
    try {
      const created = await submit({ prompt: `locked [sandbox render_ms=13000]` });
      await untilJob(created.json.id, (j) => j.status === 'running', 30_000);
      // The check's count waits on this lock for longer than the 10 s heartbeat timeout.
      await locker.query('begin');
      await locker.query('select id from jobs where id = $1 for update', [created.json.id]);
      await new Promise((r) => setTimeout(r, 12_000));
      const { raw } = await f.api.runtime.temporal.workflow.getHandle(created.json.id).describe();
      const pending = raw.pendingActivities?.[0];
      expect(pending?.activityType?.name).toBe('awaitRender');
      expect(pending?.lastFailure?.timeoutFailureInfo ?? null).toBeNull();
      await locker.query('rollback');
      await untilJob(created.json.id, terminal, 60_000);
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
      await worker.stop();
      worker = null;
    }
  });

  it('a submit slowed by a row lock past the heartbeat timeout is sent once and succeeds (issue 55, item 8)', async () => {
    await f.connect('google', { name: 'veo locked' });
    const secret = await f.key({ rate_limit_rpm: 50000 });
    const { call, until: untilJob, terminal } = videoClient(() => f, () => secret);
    const locker = await f.database.pool.connect();
    try {
      // No jobs worker yet: the job waits queued while its row is locked.
      const created = await call('POST', '/v1/videos', { model: 'google/veo-3.0-generate-001', prompt: `locked submit [sandbox render_ms=50]`, duration_seconds: 8 });
      expect(created.status).toBe(202);
      await locker.query('begin');
      await locker.query('select id from jobs where id = $1 for update', [created.json.id]);
      const rendersBefore = f.sandbox.videoSubmits();
      worker = await startWorkerProcess('jobs', prefix, env);
      // The submit's intent waits on the lock for longer than the 10 s heartbeat timeout.
      await new Promise((r) => setTimeout(r, 12_000));
      await locker.query('rollback');
      const done = await untilJob(created.json.id, terminal, 60_000);
      expect(done.status).toBe('succeeded');
      expect(f.sandbox.videoSubmits() - rendersBefore).toBe(1);
    } finally {
      await locker.query('rollback').catch(() => undefined);
      locker.release();
      await worker?.stop();
      worker = null;
    }
  });

  it('status checks retried past their old limit while Postgres is away spend no check; the job succeeds', async () => {
    await f.connect('openai', { name: 'videos' });
    const secret = await f.key({ rate_limit_rpm: 50000 });
    const { submit, until: untilJob, terminal } = videoClient(() => f, () => secret);
    worker = await startWorkerProcess('jobs', prefix, { ...env, DATABASE_URL: proxy.url(process.env.DATABASE_URL!) });
    try {
      const created = await submit({ prompt: `through an outage [sandbox render_ms=2500]` });
      expect(created.status).toBe(202);
      await untilJob(created.json.id, (j) => j.status === 'running', 30_000);
      proxy.cut();
      await until(async () => (await pendingAttempt(created.json.id)) > OLD_CHECK_ATTEMPTS, 'the status check retrying past its old limit', 60_000, 200);
      const [during] = await f.database.db.select({ checks: jobs.statusChecks }).from(jobs).where(eq(jobs.id, created.json.id));
      proxy.restore();
      const done = await untilJob(created.json.id, terminal, 60_000);
      expect(done).toMatchObject({ status: 'succeeded', error: null });
      const [row] = await f.database.db.select({ checks: jobs.statusChecks }).from(jobs).where(eq(jobs.id, created.json.id));
      // The checks the schedule made, not the retries: far fewer than the attempts seen.
      expect(row!.checks).toBeLessThan(60);
      expect(row!.checks).toBeGreaterThanOrEqual(during!.checks);
    } finally {
      proxy.restore();
      await worker.stop();
      worker = null;
    }
  });
});
