import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { and, eq } from 'drizzle-orm';
import Stripe from 'stripe';
import { fixedClock } from '../../core/clock';
import { findings, spendLedger, usageHourly, webhookDeliveries } from '../../core/db/schema';
import { newId } from '../../core/ids';
import { DETECTORS } from '../../core/findings/scan';
import { scheduleIds } from '../../workflows/definitions';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';
import { until } from '../helpers/until';
import { saveHistory } from '../helpers/histories';
import { testTemporalClient } from '../helpers/sealing-keys';
import { startMailCatcher } from '../helpers/mail-catcher';

type Loose = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
type Received = { path: string; headers: IncomingMessage['headers']; body: string };

const HOUR_MS = 3_600_000;
const SCALE = 0.0002;
const stripe = new Stripe('sk_test_unused');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A local HTTP receiver standing for a webhook endpoint and a chat app's incoming webhook. */
async function startReceiver(): Promise<{ url: (path: string) => string; received: (path: string) => Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    received: (path) => got.filter((g) => g.path === path),
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/**
 * Issue 22 end to end: traffic seeded through the hourly rollup under a fixed clock, the
 * `gw-findings-spend-anomaly` schedule triggered through the Temporal client, a maintenance and
 * a webhooks worker running the scan and the deliveries. One spike gives one finding and one
 * notification per matching channel (webhook verified with Stripe's verifier, chat app message,
 * email over real SMTP); a second run updates the finding and sends nothing; a disabled channel,
 * a muted rule and a rule scoped to another project get nothing.
 */
describe('findings: detection, lifecycle and notification', () => {
  const prefix = uniquePrefix('findings');
  // The workers' clock stands still at the test's start: the target hour cannot move under it,
  // and deliveries are signed close enough to real time for Stripe's five-minute tolerance.
  const now = new Date();
  const target = new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - HOUR_MS);
  let f: ManagementFixture;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let smtp: Awaited<ReturnType<typeof startMailCatcher>>;
  let workers: Awaited<ReturnType<typeof startTestWorkers>>;
  let temporal: Client;
  let endpointSecret: string;
  const clock = fixedClock(now);

  beforeAll(async () => {
    receiver = await startReceiver();
    smtp = await startMailCatcher();
    const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true', GW_PUBLIC_URL: 'https://gw.test', SMTP_URL: smtp.url };
    f = await startManagementFixture({ env });
    workers = await startTestWorkers(['maintenance', 'webhooks'], prefix, env, (s) => Object.assign(s, { clock }));
    temporal = testTemporalClient(await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! }));
    // The scans here are the ones the test triggers: an interval run firing on a five-minute
    // boundary of the wall clock would otherwise take the spike first, or hold the overlap
    // policy's one slot so the trigger is skipped. A paused schedule still takes triggers.
    for (const d of DETECTORS) await temporal.schedule.getHandle(scheduleIds.findingsScan(d.name, prefix)).pause('the test triggers each scan');

    const c = f.client;
    const endpoint = await c.post<Loose>('/webhook_endpoints', { url: receiver.url('/hook') });
    endpointSecret = endpoint.body.secret;
    const channel = async (body: Loose) => (await c.post<Loose>('/notification_channels', body)).body.id as string;
    const rule = async (body: Loose) => expect((await c.post('/notification_rules', Object.assign({ event_type: 'spend.anomaly' }, body))).status).toBe(201);
    await rule({ channel_id: await channel({ kind: 'webhook', label: 'hook', webhook_endpoint_id: endpoint.body.id }), min_severity: 'warning' });
    await rule({ channel_id: await channel({ kind: 'chatapp', label: 'chat', chatapp_url: receiver.url('/chat') }), scope_kind: 'project', scope_id: f.tenant.projectId });
    await rule({ channel_id: await channel({ kind: 'email', label: 'mail', emails: ['oncall@example.com'] }) });
    // Each of these must stay silent.
    const disabled = await channel({ kind: 'chatapp', label: 'disabled', chatapp_url: receiver.url('/disabled') });
    await rule({ channel_id: disabled });
    expect((await c.patch(`/notification_channels/${disabled}`, { status: 'disabled' }, '"1"')).status).toBe(200);
    const muted = await c.post<Loose>('/notification_rules', { event_type: 'spend.anomaly', channel_id: await channel({ kind: 'chatapp', label: 'muted', chatapp_url: receiver.url('/muted') }) });
    expect((await c.patch(`/notification_rules/${muted.body.id}`, { mute_days: 1 }, '"1"')).status).toBe(200);
    const otherProject = await c.post<Loose>('/projects', { name: `other-${prefix}` });
    await rule({ channel_id: await channel({ kind: 'chatapp', label: 'elsewhere', chatapp_url: receiver.url('/elsewhere') }), scope_kind: 'project', scope_id: otherProject.body.id });

    // Four weeks of ordinary hours ($1.00 to $1.40, 30 requests), then a $60 hour of 400 requests.
    const rows: Array<typeof usageHourly.$inferInsert> = [];
    for (let h = 28 * 24; h >= 1; h--) {
      const hour = new Date(target.getTime() - h * HOUR_MS);
      rows.push({ orgId: f.tenant.orgId, hour, keyId: f.tenant.key.id, projectId: f.tenant.projectId, model: 'gpt-4o-mini', provider: 'openai', requests: 30, cost: 1 + ((h * 7) % 5) / 10 });
    }
    rows.push({ orgId: f.tenant.orgId, hour: target, keyId: f.tenant.key.id, projectId: f.tenant.projectId, model: 'gpt-4o-mini', provider: 'openai', requests: 400, cost: 60 });
    await f.database.db.insert(usageHourly).values(rows);
  });
  afterAll(async () => {
    await workers?.shutdown();
    await temporal?.connection.close();
    await f?.close();
    await receiver?.close();
    await smtp?.close();
  });

  const anomalies = () => f.database.db.select().from(findings).where(and(eq(findings.orgId, f.tenant.orgId), eq(findings.type, 'spend.anomaly')));
  /** Triggers the schedule and waits for the run it started to finish. */
  async function scan(detector = 'spend-anomaly'): Promise<Loose> {
    const handle = temporal.schedule.getHandle(scheduleIds.findingsScan(detector, prefix));
    // Known by its workflow id: recentActions keeps only the last ten, so its length stops growing.
    const recent = (await handle.describe()).info.recentActions;
    const seen = new Set(recent.map((a) => a.action.workflow.workflowId));
    // A run's workflow id is the schedule's and the second it was taken: a trigger within the
    // second of the last one would name the same workflow, and start nothing.
    const last = recent.at(-1)?.takenAt.getTime();
    if (last !== undefined) await sleep(Math.max(0, 1_100 - (Date.now() - last)));
    await handle.trigger();
    const action = await until(async () => (await handle.describe()).info.recentActions.find((a) => !seen.has(a.action.workflow.workflowId)), 'the triggered run');
    const result = await temporal.workflow.getHandle(action!.action.workflow.workflowId, action!.action.workflow.firstExecutionRunId).result();
    await saveHistory(`findings-scan-by-organization-${detector}`, action!.action.workflow.workflowId);
    // With the walk-keeps-place marker (issue 55).
    await saveHistory(`findings-scan-keeps-place-${detector}`, action!.action.workflow.workflowId);
    return result;
  }

  it('opens one spend.anomaly for one spike and notifies each matching channel once', async () => {
    // The scan reads every organization in the test database; this one's own rows are asserted below.
    const result = await scan();
    expect(result.notified).toBe(3);
    const [finding, ...more] = await anomalies();
    expect(more).toHaveLength(0);
    expect(finding).toMatchObject({ status: 'open', severity: 'critical', scopeKind: 'key', scopeId: f.tenant.key.id, observed: 60, occurrences: 1 });
    expect(finding!.windowFrom).toEqual(target);
    expect(finding!.evidence).toMatchObject({ project_id: f.tenant.projectId, requests: 400 });

    const [hook] = await until(async () => (receiver.received('/hook').length > 0 ? receiver.received('/hook') : null), 'the webhook');
    const event = stripe.webhooks.constructEvent(hook!.body, hook!.headers['gw-signature'] as string, endpointSecret) as unknown as Loose;
    expect(event).toMatchObject({ type: 'spend.anomaly', data: { id: finding!.id, object: 'finding', type: 'spend.anomaly', severity: 'critical', status: 'open', scope: { kind: 'key', id: f.tenant.key.id } } });

    const [chat] = await until(async () => (receiver.received('/chat').length > 0 ? receiver.received('/chat') : null), 'the chat message');
    const message = JSON.parse(chat!.body) as Loose;
    expect(message.text).toContain(finding!.title);
    expect(message.text).toContain(`https://gw.test/manage/v1/findings/${finding!.id}`);
    expect(message.blocks.length).toBeGreaterThan(0);
    expect(chat!.headers['gw-signature']).toBeUndefined();

    const [mail] = await until(async () => (smtp.mails.length > 0 ? smtp.mails : null), 'the email');
    // No tenant text in the subject (issue 33): the title is in the body, with a one-click unsubscribe.
    expect(mail).toMatchObject({ to: 'oncall@example.com', subject: '[critical] Spend anomaly' });
    expect(mail!.text).toContain(finding!.title);
    expect(mail!.headerLines).toEqual(expect.arrayContaining([expect.stringMatching(/^List-Unsubscribe: +<https:\/\/gw\.test\/unsubscribe\/[\w-]+\.[\w-]+>$/i), 'List-Unsubscribe-Post: List-Unsubscribe=One-Click']));
    expect(mail!.text).toContain(finding!.summary);
    expect(mail!.html).toContain(finding!.id);

    const deliveries = await until(async () => {
      const rows = await f.database.db.select().from(webhookDeliveries).where(and(eq(webhookDeliveries.orgId, f.tenant.orgId), eq(webhookDeliveries.eventType, 'spend.anomaly')));
      return rows.length === 3 && rows.every((r) => r.status === 'succeeded') ? rows : null;
    }, 'three succeeded deliveries');
    // The delivery log never shows the chat app's address, only its host.
    expect(deliveries.map((d) => d.url).sort()).toEqual([receiver.url('/hook'), 'https://127.0.0.1:' + new URL(receiver.url('/')).port + '/…', 'mailto:oncall@example.com'].sort());
  });

  it('updates the same finding on a second run and sends nothing', async () => {
    const result = await scan();
    expect(result.notified).toBe(0);
    const [finding, ...more] = await anomalies();
    expect(more).toHaveLength(0);
    expect(finding!.occurrences).toBe(2);
    await sleep(500);
    expect(receiver.received('/hook')).toHaveLength(1);
    expect(receiver.received('/chat')).toHaveLength(1);
    expect(smtp.mails).toHaveLength(1);
  });

  it('sends nothing to a disabled channel, a muted rule or a rule scoped to another project', () => {
    for (const path of ['/disabled', '/muted', '/elsewhere']) expect([path, receiver.received(path)]).toEqual([path, []]);
  });

  it('shows the finding through the management API to its organization only', async () => {
    const [finding] = await anomalies();
    const read = await f.client.get<Loose>(`/findings/${finding!.id}`);
    expect(read.body).toMatchObject({ id: finding!.id, occurrences: 2, window: { from: Math.floor(target.getTime() / 1000) } });
    const other = await createTenant(f.database.db);
    expect((await manageClient(f.api.url, other.token).get(`/findings/${finding!.id}`)).status).toBe(404);
  });

  it('forecasts a credit limit running out at the last day\'s pace, with the exhaustion time inside the period', async () => {
    // Mid-month under the fixed clock: $60 of a $100 monthly limit spent, $24 of it in the last day.
    const at = new Date('2026-11-10T12:00:00Z');
    clock.set(at);
    const tenant = await createTenant(f.database.db, { creditLimit: { amount: 100, period: 'monthly' } });
    const row = (hoursAgo: number, amount: number) => ({
      id: newId('spend'), orgId: tenant.orgId, lineageId: tenant.key.id, projectId: tenant.projectId, amount, state: 'settled' as const,
      createdAt: new Date(at.getTime() - hoursAgo * HOUR_MS),
    });
    await f.database.db.insert(spendLedger).values([row(100, 36), row(20, 12), row(2, 12)]);
    try {
      const result = await scan('budget-forecast');
      expect(result.opened).toBeGreaterThanOrEqual(1);
    } finally {
      clock.set(now);
    }
    const [forecast, ...more] = await f.database.db.select().from(findings)
      .where(and(eq(findings.orgId, tenant.orgId), eq(findings.type, 'spend.forecast_over_budget')));
    expect(more).toHaveLength(0);
    // $40 left at $1 an hour: 40 hours from now, before the period ends on December 1.
    const exhaustion = new Date(at.getTime() + 40 * HOUR_MS);
    expect(forecast).toMatchObject({ scopeKind: 'key', scopeId: tenant.key.id, severity: 'warning', subject: { budget: 'credit_limit' }, threshold: 100, expected: 60 });
    expect(forecast!.evidence).toMatchObject({ projected_exhaustion_at: exhaustion.toISOString(), period_end: '2026-12-01T00:00:00.000Z' });
    expect(exhaustion.getTime()).toBeGreaterThan(forecast!.windowFrom.getTime());
    expect(exhaustion.getTime()).toBeLessThan(Date.parse(String(forecast!.evidence.period_end)));
  });
});
