import { ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { and, desc, eq, inArray } from 'drizzle-orm';
import { createMcpToolSyncActivities } from '../../activities/mcp-tool-sync';
import { createDeliveryStarter, deliveryStartOptions, startDeliveryWorkflow } from '../../activities/webhook-dispatch';
import { createWebhookSweepActivities, type SweepPage } from '../../activities/webhook-sweep';
import { systemClock } from '../../core/clock';
import { createSealer } from '../../core/crypto/sealing';
import { jobs, notificationChannels, notificationRules, webhookDeliveries } from '../../core/db/schema';
import { newId } from '../../core/ids';
import { createGuardedDispatcher } from '../../core/net/guarded-dispatcher';
import { queueEvents } from '../../core/webhooks/fan-out';
import { DELIVERY_LOG_SIZE } from '../../core/webhooks/fan-out';
import { DELIVERY_PRUNE_AFTER_MS, WEBHOOK_SWEEP_GRACE_MS } from '../../core/webhooks/schedule';
import { verifyWebhook } from '../../core/webhooks/signature';
import { scheduleIds, taskQueue, WEBHOOK_SWEEP_EVERY_MS, type WebhookSweepResult } from '../../workflows/definitions';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { createLocalCa, type LocalCa } from '../helpers/local-ca';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { startTestMcpServer, type TestMcpServer } from '../helpers/mcp-servers';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';
import { until } from '../helpers/until';
import { saveHistory } from '../helpers/histories';

const SCALE = 0.0002;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Tool = { id: string; server_id: string; definition_sha256: string };

/**
 * The delivery sweep (issue 20): a delivery whose workflow could not be started after its
 * transaction committed stays pending and unattempted; the `webhookDeliverySweep` workflow (the
 * `gw-webhook-delivery-sweep` schedule on the maintenance queue) starts it, for alert and job
 * events alike, once it is older than the grace period. Deliveries reach a real HTTPS receiver
 * through a webhooks worker in its own process, as in production.
 */
describe('webhook delivery sweep', () => {
  const prefix = uniquePrefix('sweep');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true' };
  let fixture: ManagementFixture;
  let ca: LocalCa;
  let receiver: WebhookReceiver;
  let maintenance: Awaited<ReturnType<typeof startTestWorkers>>;
  let webhooksWorker: WorkerProcess;
  let temporal: Client;
  let mcp: TestMcpServer;
  const dispatcher = createGuardedDispatcher({ allowPrivateNetwork: true });
  const deliveryOptions = () => deliveryStartOptions(prefix, SCALE);
  let seq = 0;

  beforeAll(async () => {
    ca = createLocalCa();
    receiver = await startWebhookReceiver(ca);
    fixture = await startManagementFixture({ env });
    maintenance = await startTestWorkers(['maintenance'], prefix, env);
    webhooksWorker = await startWorkerProcess('webhooks', prefix, { ...env, NODE_EXTRA_CA_CERTS: ca.caFile });
    temporal = fixture.api.runtime.temporal;
    mcp = await startTestMcpServer('streamable_http', [{ name: 'lookup', description: 'Look up a record', readOnly: true }]);
  });
  afterAll(async () => {
    await webhooksWorker?.stop();
    await maintenance?.shutdown();
    await mcp?.close();
    await dispatcher.close();
    await fixture?.close();
    await receiver?.close();
  });

  async function endpoint(path: string): Promise<{ id: string; secret: string; url: string }> {
    const res = await fixture.client.post<{ id: string; secret: string }>('/webhook_endpoints', { url: receiver.url(path) });
    expect([res.status, res.body.error]).toEqual([201, undefined]);
    return { ...res.body, url: receiver.url(path) };
  }
  /** A job that ended, and its `job.succeeded` event queued to one endpoint, its workflow never started. */
  async function unstartedJobEvent(to: { id: string; url: string }): Promise<string> {
    const db = fixture.database.db;
    const jobId = newId('job');
    await db.insert(jobs).values({
      id: jobId, orgId: fixture.tenant.orgId, keyId: 'key_sweep', lineageId: 'key_sweep', projectId: fixture.tenant.projectId,
      type: 'video', status: 'succeeded', model: 'openai/sora-2', request: {},
    });
    const [queued] = await queueEvents(db, { orgId: fixture.tenant.orgId, type: 'job.succeeded', data: { id: jobId, object: 'job', status: 'succeeded' }, jobId, now: new Date() },
      [{ receiver: to.id, endpointId: to.id, url: to.url }]);
    return queued!.id;
  }
  /** Deliveries queued a minute more than the grace period ago (or `agoMs`). */
  async function queuedLongAgo(ids: string[], agoMs = WEBHOOK_SWEEP_GRACE_MS + 60_000): Promise<void> {
    const then = new Date(Date.now() - agoMs);
    await fixture.database.db.update(webhookDeliveries).set({ createdAt: then, nextAttemptAt: then, updatedAt: then }).where(inArray(webhookDeliveries.id, ids));
  }
  const rowOf = async (id: string) => (await fixture.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, id)))[0]!;
  const delivered = (id: string) => until(async () => {
    const row = await rowOf(id);
    return row.status === 'succeeded' ? row : null;
  }, `delivery ${id} to succeed`);
  /** The sweep activity, run to its last page as the workflow would. */
  async function sweep(): Promise<{ checked: number; started: number }> {
    const activities = createWebhookSweepActivities({ db: fixture.database.db, clock: systemClock, temporal, deliveries: deliveryOptions() });
    const total = { checked: 0, started: 0 };
    let afterId: string | null = null;
    for (;;) {
      const page: SweepPage = await activities.sweepOverdueDeliveries({ afterId, limit: 2 });
      total.checked += page.checked;
      total.started += page.started;
      afterId = page.afterId;
      if (page.done) return total;
    }
  }

  it('starts an alert delivery whose start failed after the MCP sync committed, and a job event\'s; none younger than the grace period', async () => {
    const db = fixture.database.db;
    const alerts = await endpoint(`/alerts-${seq++}`);
    const channel = newId('nch');
    await db.insert(notificationChannels).values({ id: channel, orgId: fixture.tenant.orgId, kind: 'webhook', label: 'ops', webhookEndpointId: alerts.id });
    await db.insert(notificationRules).values({ id: newId('nrule'), orgId: fixture.tenant.orgId, eventType: 'mcp.tool_changed', channelId: channel, minSeverity: 'info' });
    const server = await fixture.client.post<{ id: string }>('/mcp_servers', { slug: `sw${Date.now() % 100000}`, name: 'sweep', url: mcp.url });
    expect([server.status, server.body.error]).toEqual([201, undefined]);
    const tool = (await fixture.client.get<{ data: Tool[] }>('/mcp_server_tools?limit=100')).body.data.find((t) => t.server_id === server.body.id)!;
    expect((await fixture.client.post(`/mcp_server_tools/${tool.id}/approve`, { access_class: 'read', expected_sha256: tool.definition_sha256 })).status).toBe(200);

    // The sync commits the tool's move and its alert, then cannot start the delivery (Temporal unreachable).
    const sealer = createSealer(fixture.api.config.GW_SEALING_KEYS!);
    const failingStart = createMcpToolSyncActivities({
      db, clock: systemClock, sealer, dispatcher, publicUrl: 'https://gw.test', startDeliveries: async () => {
        throw new Error('14 UNAVAILABLE: connection refused');
      },
    });
    mcp.tools = [{ name: 'lookup', description: 'Look up a record and send it elsewhere', readOnly: true }];
    await expect(failingStart.syncMcpServer({ serverId: server.body.id })).rejects.toThrow(/UNAVAILABLE/);
    const [alert] = await db.select().from(webhookDeliveries).where(eq(webhookDeliveries.endpointId, alerts.id));
    expect(alert).toMatchObject({ eventType: 'mcp.tool_changed', status: 'pending', attempts: 0 });
    // The retried activity finds the tool already `changed`: it queues nothing, so nothing else would start the alert.
    const retried = createMcpToolSyncActivities({ db, clock: systemClock, sealer, dispatcher, publicUrl: 'https://gw.test', startDeliveries: createDeliveryStarter(temporal, deliveryOptions()) });
    expect(await retried.syncMcpServer({ serverId: server.body.id })).toMatchObject({ outcome: 'synced', alertsQueued: 0 });

    const jobsEndpoint = await endpoint(`/jobs-${seq++}`);
    const jobDelivery = await unstartedJobEvent(jobsEndpoint);
    const freshEndpoint = await endpoint(`/fresh-${seq++}`);
    const fresh = await unstartedJobEvent(freshEndpoint);
    const staleEndpoint = await endpoint(`/stale-${seq++}`);
    const stale = await unstartedJobEvent(staleEndpoint);
    await queuedLongAgo([alert!.id, jobDelivery]);
    await queuedLongAgo([stale], 4 * 86_400_000);

    await sweep();
    for (const id of [alert!.id, jobDelivery]) expect(await delivered(id)).toMatchObject({ attempts: 1, lastResponseStatus: 200 });
    const [gotAlert] = receiver.received(new URL(alerts.url).pathname);
    expect(verifyWebhook<{ id: string; type: string }>(gotAlert!.body, gotAlert!.headers['gw-signature'] as string, alerts.secret)).toMatchObject({ id: alert!.eventId, type: 'mcp.tool_changed' });
    expect(receiver.received(new URL(jobsEndpoint.url).pathname)).toHaveLength(1);
    // Within the grace period the normal start may still be on its way: the sweep leaves it alone.
    expect(await rowOf(fresh)).toMatchObject({ status: 'pending', attempts: 0 });
    expect(receiver.received(new URL(freshEndpoint.url).pathname)).toHaveLength(0);
    // However long ago: a pending delivery is never left behind (issue 34).
    expect(await delivered(stale)).toMatchObject({ attempts: 1, lastResponseStatus: 200 });
    expect(receiver.received(new URL(staleEndpoint.url).pathname)).toHaveLength(1);
  });

  it('starts a new run for a delivery whose workflow was terminated mid-schedule, going on from the attempts counted', async () => {
    const target = await endpoint(`/terminated-${seq++}`);
    const id = await unstartedJobEvent(target);
    const [row] = await fixture.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, id));
    // Its workflow made three attempts (a queue no worker serves stands for them), then an operator terminated it.
    expect(await startDeliveryWorkflow(temporal, { ...deliveryOptions(), taskQueue: `${prefix}nowhere` }, row!)).toBe(true);
    await temporal.workflow.getHandle(id).terminate('operator: stuck');
    const failedAt = new Date(Date.now() - WEBHOOK_SWEEP_GRACE_MS - 60_000);
    await fixture.database.db.update(webhookDeliveries).set({ attempts: 3, lastResponseStatus: 503, nextAttemptAt: failedAt, updatedAt: failedAt }).where(eq(webhookDeliveries.id, id));

    const swept = await sweep();
    expect(swept.started).toBeGreaterThanOrEqual(1);
    expect(await delivered(id)).toMatchObject({ attempts: 4, lastResponseStatus: 200 });
    const [got] = receiver.received(new URL(target.url).pathname);
    expect(verifyWebhook<{ id: string }>(got!.body, got!.headers['gw-signature'] as string, target.secret)).toMatchObject({ id: row!.eventId });
    // A run that completed settled its delivery: a second sweep starts nothing for it.
    await until(async () => (await temporal.workflow.getHandle(id).describe()).status.name === 'COMPLETED' || null, 'the new run to complete');
    expect(await startDeliveryWorkflow(temporal, deliveryOptions(), row!, { restartClosed: true })).toBe(false);
  });

  it('prunes settled deliveries that left the organization\'s log a week ago, never a pending one or one the log shows', async () => {
    const db = fixture.database.db;
    const orgId = fixture.tenant.orgId;
    const longAgo = Date.now() - DELIVERY_PRUNE_AFTER_MS - 86_400_000;
    const row = (n: number, status: 'succeeded' | 'failed' | 'pending', updatedAt: Date) => {
      const eventId = newId('evt');
      return { id: `whd_${eventId}`, orgId, eventId, eventType: 'job.succeeded', endpointId: null, receiver: `prune-${n}`, url: 'https://receiver.test/', payload: '{}', status, attempts: 1, createdAt: new Date(longAgo + n), updatedAt };
    };
    const old = Array.from({ length: DELIVERY_LOG_SIZE + 10 }, (_, n) => row(n + 2, n % 2 ? 'succeeded' : 'failed', new Date(longAgo + n)));
    const pending = row(0, 'pending', new Date(longAgo));
    const settledYesterday = row(1, 'failed', new Date(Date.now() - 86_400_000));
    await db.insert(webhookDeliveries).values([...old, pending, settledYesterday]);
    const inLog = new Set((await db.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(eq(webhookDeliveries.orgId, orgId))
      .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.id)).limit(DELIVERY_LOG_SIZE)).map((r) => r.id));
    const inserted = [...old, pending, settledYesterday].map((r) => r.id);

    const activities = createWebhookSweepActivities({ db, clock: systemClock, temporal, deliveries: deliveryOptions() });
    const { pruned } = await activities.pruneSettledDeliveries();
    const left = new Set((await db.select({ id: webhookDeliveries.id }).from(webhookDeliveries).where(and(eq(webhookDeliveries.orgId, orgId), inArray(webhookDeliveries.id, inserted)))).map((r) => r.id));
    const expected = new Set(inserted.filter((id) => inLog.has(id) || id === pending.id || id === settledYesterday.id));
    expect(left).toEqual(expected);
    expect(pruned).toBeGreaterThanOrEqual(inserted.length - expected.size);
    expect(pruned).toBeGreaterThan(0);
    expect((await activities.pruneSettledDeliveries()).pruned).toBe(0);
    // The pending row stands for nothing real: later sweeps must not start it.
    await db.delete(webhookDeliveries).where(inArray(webhookDeliveries.id, inserted));
  });

  it('takes a delivery whose workflow was started meanwhile as done: "already started", never a second workflow', async () => {
    const target = await endpoint(`/parked-${seq++}`);
    const parked = await unstartedJobEvent(target);
    // Its workflow runs, but on a queue no worker serves: pending and unattempted, like one not started.
    const [row] = await fixture.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, parked));
    const nowhere = { ...deliveryOptions(), taskQueue: `${prefix}nowhere` };
    expect(await startDeliveryWorkflow(temporal, nowhere, row!)).toBe(true);
    await queuedLongAgo([parked]);
    try {
      const swept = await sweep();
      expect(swept.checked).toBeGreaterThanOrEqual(1);
      expect(swept.started).toBe(0);
      expect(await startDeliveryWorkflow(temporal, deliveryOptions(), row!)).toBe(false);
      const described = await temporal.workflow.getHandle(parked).describe();
      expect([described.status.name, described.taskQueue]).toEqual(['RUNNING', `${prefix}nowhere`]);
    } finally {
      await temporal.workflow.getHandle(parked).terminate('test over');
    }
    expect(receiver.received(new URL(target.url).pathname)).toHaveLength(0);
  });

  it('runs as the webhookDeliverySweep workflow of a schedule on the maintenance queue that skips overlapping runs', async () => {
    const handle = temporal.schedule.getHandle(scheduleIds.webhookDeliverySweep(prefix));
    const described = await handle.describe();
    expect(described.spec.intervals).toEqual([expect.objectContaining({ every: WEBHOOK_SWEEP_EVERY_MS })]);
    expect(described.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
    expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'webhookDeliverySweep', taskQueue: taskQueue('maintenance', prefix) });
    // A stuck run ends after three intervals, and the next is started (issue 34).
    expect(described.action).toMatchObject({ workflowRunTimeout: 3 * WEBHOOK_SWEEP_EVERY_MS });

    const target = await endpoint(`/scheduled-${seq++}`);
    const lost = await unstartedJobEvent(target);
    await queuedLongAgo([lost]);
    await handle.trigger();
    let workflowId: string | undefined;
    for (let i = 0; i < 50 && !workflowId; i++) {
      workflowId = (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId;
      if (!workflowId) await sleep(200);
    }
    expect(workflowId).toMatch(new RegExp(`^${scheduleIds.webhookDeliverySweep(prefix)}-`));
    const result = (await temporal.workflow.getHandle(workflowId!).result()) as WebhookSweepResult;
    await saveHistory('webhook-delivery-sweep-overdue-and-prune', workflowId!);
    await saveHistory('webhook-delivery-sweep-orphaned-jobs', workflowId!);
    expect(result).toMatchObject({ finished: true, pruned: expect.any(Number) });
    // The run looked for jobs whose workflow is gone too (test/workflows/job-sweep.test.ts).
    expect(result.orphanedJobsEnded).toEqual(expect.any(Number));
    expect(result.checked).toBeGreaterThanOrEqual(1);
    expect(await delivered(lost)).toMatchObject({ attempts: 1, lastResponseStatus: 200 });
    expect(receiver.received(new URL(target.url).pathname)).toHaveLength(1);
  });
});
