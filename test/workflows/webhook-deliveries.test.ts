import { saveHistory } from '../helpers/histories';
import { eq } from 'drizzle-orm';
import Stripe from 'stripe';
import { createDeliveryStarter, deliveryStartOptions } from '../../activities/webhook-dispatch';
import { jobs, notificationChannels, notificationRules, webhookDeliveries } from '../../core/db/schema';
import { newId } from '../../core/ids';
import type { Detection } from '../../core/findings/detection';
import { recordDetection } from '../../core/findings/store';
import { verifyWebhook } from '../../core/webhooks/signature';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { randomClientAddress, startTestWorkers, uniquePrefix } from '../helpers/harness';
import { manageClient } from '../helpers/manage-client';
import { createLocalCa, type LocalCa } from '../helpers/local-ca';
import { startWebhookReceiver, type ReceivedDelivery, type WebhookReceiver } from '../helpers/webhook-receiver';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';
import { until } from '../helpers/until';

/** The twelve attempts' waits (10 s ... 8 h) shrink to 2 ms ... 5.8 s; the 10 s answer limit does not. */
const SCALE = 0.0002;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stripe = new Stripe('sk_test_unused');

/**
 * Webhook delivery end to end (spec 2.3, 6.1, 6.3): video jobs run on the sandbox, the API and
 * a jobs worker queue their events, and a webhooks worker in its own process (so it can be
 * killed) delivers them over HTTPS to a local receiver whose certificate a test CA signed.
 */
describe('webhook deliveries', () => {
  const prefix = uniquePrefix('webhooks');
  // Private network allowed, as in development: the sandbox and the receiver are on loopback.
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_PUBLIC_URL: 'https://gw.test', GW_ALLOW_PRIVATE_NETWORK: 'true', GW_TEMPORAL_UI_URL: 'http://temporal-ui.test:8233' };
  let f: ChatFixture;
  let ca: LocalCa;
  let receiver: WebhookReceiver;
  let jobsWorker: Awaited<ReturnType<typeof startTestWorkers>>;
  let webhooksWorker: WorkerProcess;
  let key: string;
  let seq = 0;
  const startWebhooksWorker = () => startWorkerProcess('webhooks', prefix, { ...env, NODE_EXTRA_CA_CERTS: ca.caFile });

  beforeAll(async () => {
    ca = createLocalCa();
    receiver = await startWebhookReceiver(ca);
    f = await startChatFixture(env);
    jobsWorker = await startTestWorkers(['jobs'], prefix, env);
    webhooksWorker = await startWebhooksWorker();
    await f.connect('openai', { name: 'videos' });
    key = await f.key({ rate_limit_rpm: 50000, observability_access: 'organization' });
  });
  afterAll(async () => {
    await webhooksWorker?.stop();
    await jobsWorker?.shutdown();
    await f?.close();
    await receiver?.close();
  });
  // Each test configures its own endpoints: none left from an earlier one receives its events.
  beforeEach(async () => {
    const list = await f.client.get<{ data: Array<{ id: string; version: number }> }>('/webhook_endpoints');
    for (const e of list.body.data) expect((await f.client.delete(`/webhook_endpoints/${e.id}`, `"${e.version}"`)).status).toBe(200);
  });

  async function gateway(method: string, path: string, body?: unknown): Promise<{ status: number; json: Loose }> {
    const res = await fetch(`${f.api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Loose };
  }
  async function endpoint(path: string, events?: string[]): Promise<{ id: string; secret: string }> {
    const res = await f.client.post<{ id: string; secret: string }>('/webhook_endpoints', { url: receiver.url(path), ...(events && { events }) });
    expect(res.status).toBe(201);
    return res.body;
  }
  /** A video job run to its end; `directives` steer the sandbox (e.g. `video_fail`). */
  async function runJob(extra: Record<string, unknown> = {}, directives = ''): Promise<Loose> {
    const created = await gateway('POST', '/v1/videos', { model: 'openai/sora-2', duration_seconds: 4, prompt: `clip [sandbox render_ms=30 ${directives}] ${seq++}`, ...extra });
    expect(created.status).toBe(202);
    await until(async () => {
      const [row] = await f.database.db.select({ status: jobs.status }).from(jobs).where(eq(jobs.id, created.json.id));
      return row && ['succeeded', 'failed', 'canceled'].includes(row.status);
    }, `job ${created.json.id} to end`);
    return (await gateway('GET', `/v1/jobs/${created.json.id}`)).json;
  }
  const log = async () => {
    const res = await f.client.get<{ data: Loose[] }>('/webhook_deliveries');
    expect(res.status).toBe(200);
    return res.body.data;
  };
  const deliveriesOf = async (jobId: string) => (await log()).filter((d) => d.job_id === jobId);
  /** Waits (reading the table: the token's 120 a minute are for the assertions) until the job's deliveries end; answers the log's entries. */
  async function finished(jobId: string, count = 1): Promise<Loose[]> {
    await until(async () => {
      const rows = await f.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.jobId, jobId));
      return rows.length === count && rows.every((d) => d.status !== 'pending');
    }, `deliveries of ${jobId}`);
    return deliveriesOf(jobId);
  }
  const arrived = (path: string, count = 1) => until(async () => (receiver.received(path).length >= count ? receiver.received(path) : null), `${count} at ${path}`);
  const signatureOf = (r: ReceivedDelivery) => r.headers['gw-signature'] as string | undefined;
  const tOf = (r: ReceivedDelivery) => Number(/t=(\d+)/.exec(signatureOf(r)!)![1]);

  it('announces a succeeded job over HTTPS: signed, verified by Stripe\'s verifier, logged succeeded after 1 attempt', async () => {
    const e = await endpoint('/e2e');
    const job = await runJob();
    expect(job).toMatchObject({ status: 'succeeded', error: null });
    const [delivery] = await finished(job.id);
    const [got] = await arrived('/e2e');
    expect(got!.headers).toMatchObject({ 'content-type': 'application/json', 'user-agent': 'GW-Webhooks/1' });
    const event = stripe.webhooks.constructEvent(got!.body, signatureOf(got!)!, e.secret) as unknown as Loose;
    expect(verifyWebhook(got!.body, signatureOf(got!), e.secret)).toEqual(event);
    expect(event).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'job.succeeded', created_at: expect.any(Number) });
    expect(got!.headers['gw-event-id']).toBe(event.id);
    // The job exactly as a read returns it (nothing about it changed since it was queued).
    expect(event.data).toEqual((await gateway('GET', `/v1/jobs/${job.id}`)).json);
    expect(delivery).toMatchObject({
      object: 'webhook_delivery', id: `whd_${event.id}`, event_id: event.id, event_type: 'job.succeeded', job_id: job.id, endpoint_id: e.id,
      url: receiver.url('/e2e'), status: 'succeeded', attempts: 1, last_response_status: 200, last_error: null, next_attempt_at: null, created_at: expect.any(Number),
    });
    // An operator finds it in the Temporal UI by organization, endpoint and status.
    const described = await f.api.runtime.temporal.workflow.getHandle(delivery!.id).describe();
    expect(described.typedSearchAttributes.get({ name: 'GwEndpointId', type: 'KEYWORD' } as never)).toBe(e.id);
    expect(described.typedSearchAttributes.get({ name: 'GwOrgId', type: 'KEYWORD' } as never)).toBe(f.tenant.orgId);
    await f.api.runtime.temporal.workflow.getHandle(delivery!.id).result();
    await saveHistory('webhook-delivery-succeeded', delivery!.id);
    // The branch since DELIVERY_RIDES_RETRY_POLICY (the histories above were recorded before it).
    await saveHistory('webhook-delivery-succeeded-rides-retry-policy', delivery!.id);
  });

  it('retries a 500: the same event id and bytes, a fresh signature, and nothing after the 2xx', async () => {
    const e = await endpoint('/flaky');
    // The 500 is slow enough that the retry's timestamp is a later second.
    receiver.on('/flaky', (n) => (n === 0 ? { status: 500, delayMs: 1100 } : { status: 204 }));
    const job = await runJob();
    const [delivery] = await finished(job.id);
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2, last_response_status: 204, last_error: null });
    await sleep(500);
    const [first, second, ...more] = receiver.received('/flaky');
    expect(more).toHaveLength(0);
    expect(second!.body).toBe(first!.body);
    expect(second!.headers['gw-event-id']).toBe(first!.headers['gw-event-id']);
    expect(tOf(second!)).toBeGreaterThan(tOf(first!));
    expect(signatureOf(second!)).not.toBe(signatureOf(first!));
    for (const r of [first!, second!]) expect(stripe.webhooks.constructEvent(r.body, signatureOf(r)!, e.secret, 300)).toBeDefined();
  });

  it('counts a 308 as failed and never follows it', async () => {
    await endpoint('/moved');
    receiver.on('/moved', (n) => (n === 0 ? { status: 308, headers: { location: receiver.url('/redirect-target') } } : { status: 200 }));
    const job = await runJob();
    const [delivery] = await finished(job.id);
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect(receiver.received('/moved')).toHaveLength(2);
    expect(receiver.received('/redirect-target')).toHaveLength(0);
  });

  it('counts an answer after 11 s as failed', async () => {
    await endpoint('/slow');
    receiver.on('/slow', (n) => (n === 0 ? { status: 200, delayMs: 11_000 } : { status: 200 }));
    const job = await runJob();
    const [first] = await arrived('/slow');
    const [delivery] = await finished(job.id);
    const [, second] = receiver.received('/slow');
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2 });
    // The second attempt came once the first had waited out its 10 s, not after the 11 s answer.
    expect(second!.receivedAt - first!.receivedAt).toBeGreaterThanOrEqual(10_000);
  });

  it('gives up after twelve failed attempts: the delivery is failed, the job is not', async () => {
    await endpoint('/down');
    receiver.on('/down', () => ({ status: 503 }));
    const job = await runJob();
    const [delivery] = await finished(job.id);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 12, last_response_status: 503, last_error: expect.stringContaining('503'), next_attempt_at: null });
    expect(receiver.received('/down')).toHaveLength(12);
    expect(new Set(receiver.received('/down').map((r) => r.body)).size).toBe(1);
    expect((await gateway('GET', `/v1/jobs/${job.id}`)).json).toMatchObject({ status: 'succeeded' });
    // The twelve attempts ride one activity's retries: at most 16 history events (issue 34).
    const handle = f.api.runtime.temporal.workflow.getHandle(delivery!.id);
    expect(await handle.result()).toEqual({ status: 'failed' });
    expect(((await handle.fetchHistory()).events ?? []).length).toBeLessThanOrEqual(16);
    await saveHistory('webhook-delivery-failed', delivery!.id);
    await saveHistory('webhook-delivery-failed-rides-retry-policy', delivery!.id);
  });

  it('signs with both secrets during a rotation, current first; each verifies', async () => {
    const e = await endpoint('/rotating');
    const rotated = await f.client.post<{ secret: string }>(`/webhook_endpoints/${e.id}/rotate_secret`, {});
    expect(rotated.status).toBe(200);
    const job = await runJob();
    await finished(job.id);
    const [got] = receiver.received('/rotating');
    const header = signatureOf(got!)!;
    expect(header.match(/v1=/g)).toHaveLength(2);
    for (const secret of [rotated.body.secret, e.secret]) expect(stripe.webhooks.constructEvent(got!.body, header, secret)).toBeDefined();
    const current = header.split(',')[1]!;
    expect(() => stripe.webhooks.constructEvent(got!.body, `${header.split(',')[0]},${current}`, rotated.body.secret)).not.toThrow();
  });

  it('sends a per-request webhook instead of the console endpoints, signed with their secrets', async () => {
    const a = await endpoint('/console-a');
    const b = await endpoint('/console-b');
    const job = await runJob({ webhook: { url: receiver.url('/per-request') } });
    const [delivery] = await finished(job.id);
    expect(delivery).toMatchObject({ endpoint_id: null, url: receiver.url('/per-request'), status: 'succeeded' });
    const [got] = receiver.received('/per-request');
    const header = signatureOf(got!)!;
    expect(header.match(/v1=/g)).toHaveLength(2);
    for (const secret of [a.secret, b.secret]) expect(stripe.webhooks.constructEvent(got!.body, header, secret)).toBeDefined();
    expect(receiver.received('/console-a')).toHaveLength(0);
    expect(receiver.received('/console-b')).toHaveLength(0);
  });

  it('sends a per-request webhook unsigned when the organization has no console endpoint, and only its events', async () => {
    const job = await runJob({ webhook: { url: receiver.url('/unsigned') } });
    await finished(job.id);
    const [got] = receiver.received('/unsigned');
    expect(got!.headers['gw-signature']).toBeUndefined();
    expect(got!.headers['gw-event-id']).toBe(JSON.parse(got!.body).id);
    // A per-request webhook that asked only for failures hears nothing of a success.
    const quiet = await runJob({ webhook: { url: receiver.url('/failures-only'), events: ['job.failed'] } });
    expect(quiet.status).toBe('succeeded');
    await sleep(500);
    expect(await deliveriesOf(quiet.id)).toHaveLength(0);
    expect(receiver.received('/failures-only')).toHaveLength(0);
  });

  it('honours each endpoint\'s events and gives each receiver its own event id', async () => {
    const failures = await endpoint('/failed-only', ['job.failed']);
    const successes = await endpoint('/succeeded-only', ['job.succeeded']);
    const all1 = await endpoint('/all-1');
    const all2 = await endpoint('/all-2');
    const failed = await runJob({}, 'video_fail');
    expect(failed.status).toBe('failed');
    const ds = await finished(failed.id, 3);
    expect(ds.map((d) => d.endpoint_id).sort()).toEqual([failures.id, all1.id, all2.id].sort());
    expect(new Set(ds.map((d) => d.event_id)).size).toBe(3);
    const [one] = receiver.received('/all-1');
    const [two] = receiver.received('/all-2');
    const [e1, e2] = [JSON.parse(one!.body), JSON.parse(two!.body)];
    expect(e1.id).not.toBe(e2.id);
    expect({ ...e1, id: null }).toEqual({ ...e2, id: null });
    expect(e1).toMatchObject({ type: 'job.failed', data: { id: failed.id, status: 'failed', error: { type: 'upstream_error' } } });
    expect(receiver.received('/succeeded-only').filter((r) => JSON.parse(r.body).data.id === failed.id)).toHaveLength(0);
    void successes;
  });

  it('lists the latest deliveries newest first, to a token with webhooks:read', async () => {
    const entries = await log();
    expect(entries.length).toBeGreaterThan(3);
    const created = entries.map((d) => d.created_at);
    expect([...created].sort((x, y) => y - x)).toEqual(created);
    const tokenWith = async (scopes: string[]) =>
      (await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: scopes.join(' '), scopes, createdByMemberId: f.tenant.memberId })).token;
    const reader = manageClient(f.api.url, await tokenWith(['webhooks:read']));
    expect((await reader.get<{ data: Loose[] }>('/webhook_deliveries')).body.data.map((d) => d.id)).toEqual(entries.map((d) => d.id));
    const other = await manageClient(f.api.url, await tokenWith(['projects:read'])).get('/webhook_deliveries');
    expect([other.status, other.body.error?.code]).toEqual([403, 'insufficient_scope']);
  });

  it('shows a per-request URL as scheme, host and path only, never to a token restricted to other projects, and no Temporal UI link to a tenant (issue 33)', async () => {
    const job = await runJob({ webhook: { url: `${receiver.url('/tokened')}?token=secret-in-query` } });
    const [delivery] = await finished(job.id);
    expect(delivery!.url).toBe(receiver.url('/tokened'));
    expect(JSON.stringify(await log())).not.toContain('secret-in-query');
    const detail = await f.client.get<Loose>(`/jobs/${job.id}`);
    expect(JSON.stringify(detail.body.timeline)).toContain(receiver.url('/tokened'));
    expect(JSON.stringify(detail.body)).not.toContain('secret-in-query');
    // This organization is not the operator's: no Temporal UI address or namespace.
    expect(detail.body.workflow).toEqual({ id: job.id, url: null });
    const restricted = async (projectIds: string[]) => manageClient(f.api.url, (await issueManagementToken(f.database.db, {
      orgId: f.tenant.orgId, name: `restricted ${seq++}`, scopes: ['webhooks:read'], projectIds, createdByMemberId: f.tenant.memberId,
    })).token);
    const elsewhere = await (await restricted(['proj_elsewhere'])).get<{ data: Loose[] }>('/webhook_deliveries');
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.data.filter((d) => d.job_id !== null)).toEqual([]);
    const own = await (await restricted([f.tenant.projectId])).get<{ data: Loose[] }>('/webhook_deliveries');
    expect(own.body.data.map((d) => d.id)).toContain(delivery!.id);
  });

  it('sends an alert only to endpoints a notification rule attaches, at or above its severity', async () => {
    const attached = await endpoint('/alerts');
    const bystander = await endpoint('/bystander');
    const db = f.database.db;
    const channel = newId('nch');
    await db.insert(notificationChannels).values({ id: channel, orgId: f.tenant.orgId, kind: 'webhook', label: 'ops', webhookEndpointId: attached.id });
    await db.insert(notificationRules).values({ id: newId('nrule'), orgId: f.tenant.orgId, eventType: 'budget.threshold_crossed', channelId: channel, minSeverity: 'warning' });
    const start = createDeliveryStarter(f.api.runtime.temporal, deliveryStartOptions(prefix, SCALE));
    const detection = (type: Detection['type'], severity: Detection['severity']): Detection => ({
      orgId: f.tenant.orgId, type, severity, title: 'Budget crossed', summary: 'The project passed 80% of its budget.', scope: { kind: 'project', id: f.tenant.projectId },
      subject: { budget: 'spend_limit:2026-11-01:0.8' }, window: { from: new Date(), to: new Date() }, observed: 80, expected: null, threshold: 80, evidence: { fraction: 0.8 },
    });
    const notify = { publicUrl: 'https://gw.test' };

    expect((await recordDetection(db, detection('budget.threshold_crossed', 'info'), new Date(), notify)).deliveries).toHaveLength(0);
    expect((await recordDetection(db, detection('spend.anomaly', 'critical'), new Date(), notify)).deliveries).toHaveLength(0);
    // The same finding raised to critical: now at or above the rule's minimum.
    const raised = await recordDetection(db, detection('budget.threshold_crossed', 'critical'), new Date(), notify);
    expect(raised.change).toBe('raised');
    const queued = raised.deliveries;
    expect(queued).toHaveLength(1);
    await start(queued);
    await start(queued);
    const [got] = await arrived('/alerts');
    expect(stripe.webhooks.constructEvent(got!.body, signatureOf(got!)!, attached.secret)).toMatchObject({
      type: 'budget.threshold_crossed', data: { id: raised.finding.id, object: 'finding', severity: 'critical', scope: { kind: 'project', id: f.tenant.projectId } },
    });
    await until(async () => {
      const [row] = await db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, queued[0]!.id));
      return row?.status === 'succeeded';
    }, 'the alert delivery');
    await sleep(300);
    expect(receiver.received('/alerts')).toHaveLength(1);
    expect(receiver.received('/bystander')).toHaveLength(0);
    await f.api.runtime.temporal.workflow.getHandle(queued[0]!.id).result();
    await saveHistory('webhook-delivery-alert', queued[0]!.id);
    void bystander;
  });

  it('survives a webhooks worker killed during an attempt: same count, id and bytes; one success', async () => {
    await endpoint('/hangs');
    // The first attempt hangs until its worker is gone; the next one is answered.
    receiver.on('/hangs', (n) => (n === 0 ? { status: 200, delayMs: 60_000 } : { status: 200 }));
    const job = await runJob();
    const [first] = await arrived('/hangs');
    await webhooksWorker.kill();
    webhooksWorker = await startWebhooksWorker();
    const [delivery] = await finished(job.id);
    const [, second, ...more] = receiver.received('/hangs');
    expect(more).toHaveLength(0);
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2, last_response_status: 200 });
    expect(second!.body).toBe(first!.body);
    expect(second!.headers['gw-event-id']).toBe(first!.headers['gw-event-id']);
    const rows = await f.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.jobId, job.id));
    expect(rows).toHaveLength(1);
    expect(await f.api.runtime.temporal.workflow.getHandle(delivery!.id).result()).toEqual({ status: 'succeeded' });
    await saveHistory('webhook-delivery-lost-attempt', delivery!.id);
  });
});
