import { createHmac } from 'node:crypto';
import { and, asc, eq, inArray } from 'drizzle-orm';
import { createWebhookDeliveryActivities } from '../../activities/webhook-delivery';
import { systemClock } from '../../core/clock';
import { createSealer, deriveKey } from '../../core/crypto/sealing';
import { auditEvents, notificationRules } from '../../core/db/schema';
import type { Detection } from '../../core/findings/detection';
import { recordDetection } from '../../core/findings/store';
import { newId } from '../../core/ids';
import { createGuardedDispatcher } from '../../core/net/guarded-dispatcher';
import { createMailer } from '../../core/notifications/mailer';
import { UNSUBSCRIBE_KEY_PURPOSE } from '../../core/notifications/unsubscribe';
import { startMailCatcher, unsubscribeLinkOf } from '../helpers/mail-catcher';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

type Loose = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * Issue 52 item 6: unsubscribing is the address's, for the whole organization. The tenant that
 * lists the address cannot undo it (patching the channel, another channel, another spelling,
 * deleting and making the channel again); only the address can, through the re-subscribe link
 * its unsubscribe gave it. Mail goes over real SMTP to a catcher; the links are followed over HTTP.
 */
describe('alert email unsubscribe', () => {
  let f: ManagementFixture;
  let smtp: Awaited<ReturnType<typeof startMailCatcher>>;
  const key = () => deriveKey(process.env.GW_SEALING_KEYS!, UNSUBSCRIBE_KEY_PURPOSE);
  let activities: ReturnType<typeof createWebhookDeliveryActivities>;

  beforeAll(async () => {
    f = await startManagementFixture({ env: { GW_ALLOW_PRIVATE_NETWORK: 'true' } });
    smtp = await startMailCatcher();
    activities = createWebhookDeliveryActivities({
      db: f.database.db, clock: systemClock, sealer: createSealer(process.env.GW_SEALING_KEYS!), dispatcher: createGuardedDispatcher({ allowPrivateNetwork: true }),
      mailer: createMailer(smtp.url, 'alerts@gw.test'),
      unsubscribe: { publicUrl: f.api.url, key: key() },
    });
  });
  afterAll(async () => {
    await f?.close();
    await smtp?.close();
  });

  const db = () => f.database.db;
  const detection = (orgId: string): Detection => {
    const model = `m-${newId('req')}`;
    return {
      orgId, type: 'unpriced.traffic', severity: 'warning', title: `Unpriced traffic to ${model}`, summary: `Requests to ${model} had no price.`,
      scope: { kind: 'model', id: model }, subject: {}, window: { from: new Date(), to: new Date() }, observed: 1, expected: null, threshold: null, evidence: {},
    };
  };
  /** A fresh alert to every channel of the organization, attempted once; who the catcher got mail for. */
  const alert = async (orgId: string) => {
    smtp.mails.length = 0;
    const { deliveries } = await recordDetection(db(), detection(orgId), new Date(), { publicUrl: f.api.url });
    const outcomes = await Promise.all(deliveries.map((d) => activities.attemptDelivery({ deliveryId: d.id, attempt: 1, nextAttemptInMs: 60_000 })));
    expect(outcomes.every((o) => o.status === 'succeeded')).toBe(true);
    return smtp.mails.map((m) => m.to).sort();
  };
  const emailChannel = async (t: Tenant, emails: string[]) => {
    const channel = await manageClient(f.api.url, t.token).post<Loose>('/notification_channels', { kind: 'email', label: `mail ${newId('req')}`, emails });
    expect(channel.status).toBe(201);
    await db().insert(notificationRules).values({ id: newId('nrule'), orgId: t.orgId, eventType: 'unpriced.traffic', channelId: channel.body.id });
    return channel.body as Loose;
  };
  const post = (url: string) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
  /** The address a page's form posts to, as a browser resolves it. */
  const formAction = (html: string, page: string) => new URL(html.match(/<form method="post" action="([^"]+)"/)![1]!, page).toString();

  it('stops the address for every channel of the organization, whatever the tenant does, until the address re-subscribes through its link', async () => {
    const t = await createTenant(db());
    const client = manageClient(f.api.url, t.token);
    const first = await emailChannel(t, ['ops@example.com', 'cfo@example.com']);
    expect(await alert(t.orgId)).toEqual(['cfo@example.com', 'ops@example.com']);
    const link = unsubscribeLinkOf(smtp.mails.find((m) => m.to === 'cfo@example.com')!);

    // The mail client's one-click POST (RFC 8058); its answer offers the way back.
    const unsubscribed = await post(link);
    expect(unsubscribed.status).toBe(200);
    const resubscribe = formAction(await unsubscribed.text(), link);
    expect(resubscribe).toMatch(new RegExp(`^${f.api.url}/resubscribe/[\\w-]+\\.[\\w-]+$`));
    expect(await alert(t.orgId)).toEqual(['ops@example.com']);

    // The tenant names the address again every way it can.
    let read = await client.get<Loose>(`/notification_channels/${first.id}`);
    expect(read.body.unsubscribed_emails).toEqual(['cfo@example.com']);
    const removed = await client.patch<Loose>(`/notification_channels/${first.id}`, { emails: ['ops@example.com'] }, read.etag!);
    expect(removed.status).toBe(200);
    const readded = await client.patch<Loose>(`/notification_channels/${first.id}`, { emails: ['ops@example.com', 'CFO@example.com'] }, removed.etag!);
    expect([readded.status, readded.body.unsubscribed_emails]).toEqual([200, ['CFO@example.com']]);
    const cleared = await client.patch<Loose>(`/notification_channels/${first.id}`, { unsubscribed_emails: [] }, readded.etag!);
    expect([cleared.status, cleared.body.error?.type]).toEqual([400, 'invalid_request_error']);
    const tagged = await emailChannel(t, ['cfo+alerts@example.com', 'audit@example.com']);
    expect(tagged.unsubscribed_emails).toEqual(['cfo+alerts@example.com']);
    expect((await client.delete(`/notification_channels/${first.id}`, readded.etag!)).status).toBe(200);
    const remade = await emailChannel(t, ['ops@example.com', 'cfo@example.com']);
    expect(remade.unsubscribed_emails).toEqual(['cfo@example.com']);
    expect(await alert(t.orgId)).toEqual(['audit@example.com', 'ops@example.com']);

    // It was this organization's mail the address stopped, not another's.
    const other = await createTenant(db());
    await emailChannel(other, ['cfo@example.com']);
    expect(await alert(other.orgId)).toEqual(['cfo@example.com']);

    // Opening a link (a scanner) changes nothing; the unsubscribe link keeps offering the way back.
    expect((await fetch(resubscribe)).status).toBe(200);
    const again = await fetch(link);
    expect(formAction(await again.text(), link)).toBe(resubscribe);
    expect(await alert(t.orgId)).toEqual(['audit@example.com', 'ops@example.com']);
    // An unsubscribe token is not a re-subscribe token.
    expect((await post(link.replace('/unsubscribe/', '/resubscribe/'))).status).toBe(404);

    // The address itself re-subscribes: every channel that lists it mails it again.
    expect((await post(resubscribe)).status).toBe(200);
    expect(await alert(t.orgId)).toEqual(['audit@example.com', 'cfo+alerts@example.com', 'cfo@example.com', 'ops@example.com']);
    read = await client.get<Loose>(`/notification_channels/${remade.id}`);
    expect(read.body.unsubscribed_emails).toEqual([]);

    const audits = await db().select().from(auditEvents)
      .where(and(eq(auditEvents.orgId, t.orgId), inArray(auditEvents.action, ['notification_channels.unsubscribed', 'notification_channels.resubscribed']))).orderBy(asc(auditEvents.createdAt), asc(auditEvents.resourceId));
    expect(audits.map((a) => [a.action, a.resourceId, a.detail])).toEqual([
      ['notification_channels.unsubscribed', first.id, { email: 'cfo@example.com' }],
      ...[remade.id, tagged.id].sort().map((id) => ['notification_channels.resubscribed', id, { email: 'cfo@example.com' }]),
    ]);
  });

  it('keeps the links of mail sent before: one naming only its channel unsubscribes the address from the organization', async () => {
    const t = await createTenant(db());
    const channel = await emailChannel(t, ['cto@example.com']);
    // The token those emails carried: HMAC of "unsubscribe:" and the base64url of [channel, address].
    const older = (channelId: string, email: string) => {
      const payload = Buffer.from(JSON.stringify([channelId, email])).toString('base64url');
      return `${f.api.url}/unsubscribe/${payload}.${createHmac('sha256', key()).update(`unsubscribe:${payload}`).digest('base64url')}`;
    };
    expect((await post(older(channel.id, 'cto@example.com'))).status).toBe(200);
    await emailChannel(t, ['cto@example.com', 'cio@example.com']);
    expect(await alert(t.orgId)).toEqual(['cio@example.com']);
    // A channel since deleted no longer says whose the address was.
    const gone = await post(older('nch_deleted', 'cto@example.com'));
    expect([gone.status, ((await gone.json()) as Loose).error?.type]).toEqual([404, 'not_found']);
  });
});
