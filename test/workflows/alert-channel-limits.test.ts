import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { and, count, eq } from 'drizzle-orm';
import { createWebhookDeliveryActivities } from '../../activities/webhook-delivery';
import { systemClock } from '../../core/clock';
import { createSealer, deriveKey } from '../../core/crypto/sealing';
import { connectDatabase } from '../../core/db/client';
import { auditEvents, notificationChannels, notificationRules, notificationSends } from '../../core/db/schema';
import type { Detection } from '../../core/findings/detection';
import { recordDetection } from '../../core/findings/store';
import { newId } from '../../core/ids';
import { createGuardedDispatcher } from '../../core/net/guarded-dispatcher';
import { emailRecipient, MAX_CHANNELS_PER_ORGANIZATION, SENDS_PER_CHANNEL_PER_HOUR, SENDS_PER_RECIPIENT_PER_HOUR, SENDS_PER_RECIPIENT_PER_HOUR_ALL } from '../../core/notifications/limits';
import type { MailMessage } from '../../core/notifications/mailer';
import { UNSUBSCRIBE_KEY_PURPOSE } from '../../core/notifications/unsubscribe';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant, type Tenant } from '../helpers/tenants';

type Loose = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * Issue 33 item 3: alert channels cannot be used to mail or post to anyone at will. Channels are
 * bounded per organization, sends per channel and per recipient (across organizations), tenant
 * text stays out of subjects and headers, every email has a one-click unsubscribe, and a chat
 * app address that keeps refusing disables its channel.
 */
describe('alert channel limits', () => {
  let f: ManagementFixture;
  const mails: MailMessage[] = [];
  const keyring = () => process.env.GW_SEALING_KEYS!;
  let activities: ReturnType<typeof createWebhookDeliveryActivities>;

  beforeAll(async () => {
    f = await startManagementFixture({ env: { GW_ALLOW_PRIVATE_NETWORK: 'true' } });
    activities = createWebhookDeliveryActivities({
      db: f.database.db, clock: systemClock, sealer: createSealer(keyring()), dispatcher: createGuardedDispatcher({ allowPrivateNetwork: true }),
      mailer: async (message) => {
        mails.push(message);
        return { ok: true, status: null, error: null };
      },
      unsubscribe: { publicUrl: f.api.url, key: deriveKey(keyring(), UNSUBSCRIBE_KEY_PURPOSE) },
    });
  });
  afterAll(() => f.close());

  const db = () => f.database.db;
  const detection = (orgId: string, model: string): Detection => ({
    orgId, type: 'unpriced.traffic', severity: 'warning', title: `Unpriced traffic to ${model}`, summary: `Requests to ${model} had no price.`,
    scope: { kind: 'model', id: model }, subject: {}, window: { from: new Date(), to: new Date() }, observed: 1, expected: null, threshold: null, evidence: {},
  });
  /** An alert to the organization's channels for a fresh model, attempted once; the attempt's outcome. */
  const alert = async (orgId: string, model = `m-${newId('req')}`) => {
    const { deliveries } = await recordDetection(db(), detection(orgId, model), new Date(), { publicUrl: f.api.url });
    return Promise.all(deliveries.map((d) => activities.attemptDelivery({ deliveryId: d.id, attempt: 1, nextAttemptInMs: 60_000 })));
  };
  const emailChannel = async (t: Tenant, emails: string[]) => {
    const channel = await manageClient(f.api.url, t.token).post<Loose>('/notification_channels', { kind: 'email', label: `mail ${newId('req')}`, emails });
    expect(channel.status).toBe(201);
    await db().insert(notificationRules).values({ id: newId('nrule'), orgId: t.orgId, eventType: 'unpriced.traffic', channelId: channel.body.id });
    return channel.body.id as string;
  };

  it('keeps tenant text out of the subject, sends each address its own email with a one-click unsubscribe that stops it, recorded and audited', async () => {
    const t = await createTenant(db());
    const channel = await emailChannel(t, ['ops@example.com', 'cfo@example.com']);
    mails.length = 0;
    const [outcome] = await alert(t.orgId, 'evil-model\r\nBcc: victim@example.com');
    expect(outcome).toEqual({ status: 'succeeded' });
    expect(mails.map((m) => m.to)).toEqual([['ops@example.com'], ['cfo@example.com']]);
    for (const mail of mails) {
      expect(mail.subject).toBe('[warning] Unpriced traffic');
      expect(JSON.stringify(mail.headers)).not.toContain('evil-model');
      expect(mail.headers!['List-Unsubscribe-Post']).toBe('List-Unsubscribe=One-Click');
      expect(mail.headers!['List-Unsubscribe']).toMatch(new RegExp(`^<${f.api.url}/unsubscribe/[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+>$`));
    }
    // The tenant's text is in the body, escaped.
    expect(mails[0]!.html).toContain('evil-model');
    expect(mails[0]!.html).not.toContain('<script');

    const link = mails[1]!.headers!['List-Unsubscribe']!.slice(1, -1);
    // A link scanner's GET changes nothing; a forged token is refused.
    expect((await fetch(link)).status).toBe(200);
    expect((await fetch(`${link}x`, { method: 'POST' })).status).toBe(404);
    const unsubscribedOf = async () => (await manageClient(f.api.url, t.token).get<Loose>(`/notification_channels/${channel}`)).body.unsubscribed_emails;
    expect(await unsubscribedOf()).toEqual([]);
    const oneClick = await fetch(link, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(oneClick.status).toBe(200);
    expect(await unsubscribedOf()).toEqual(['cfo@example.com']);
    const audits = await db().select().from(auditEvents).where(and(eq(auditEvents.orgId, t.orgId), eq(auditEvents.action, 'notification_channels.unsubscribed')));
    expect(audits.map((a) => [a.resourceId, a.detail])).toEqual([[channel, { email: 'cfo@example.com' }]]);

    mails.length = 0;
    await alert(t.orgId);
    expect(mails.map((m) => m.to)).toEqual([['ops@example.com']]);
  });

  it('limits alerts per recipient (an organization\'s, and every organization\'s together), and per channel', async () => {
    const [a, b, c0] = [await createTenant(db()), await createTenant(db()), await createTenant(db())];
    const shared = `shared-${newId('req')}@example.com`;
    await emailChannel(a, [shared]);
    await emailChannel(b, [shared]);
    const sends = (orgId: string, n: number) => db().insert(notificationSends).values(Array.from({ length: n }, () => ({
      id: newId('nsend'), orgId, channelId: 'nch_elsewhere', recipient: emailRecipient(shared), sentAt: new Date(),
    })));
    // Organization A already sent the address its hour's worth: A waits, B does not.
    await sends(a.orgId, SENDS_PER_RECIPIENT_PER_HOUR);
    mails.length = 0;
    expect(await alert(a.orgId)).toEqual([{ status: 'pending' }]);
    expect(mails).toHaveLength(0);
    expect(await alert(b.orgId)).toEqual([{ status: 'succeeded' }]);
    expect(mails.map((m) => m.to)).toEqual([[shared]]);
    // Every organization together: past the relay bound, nobody's alert reaches it this hour.
    await sends(c0.orgId, SENDS_PER_RECIPIENT_PER_HOUR_ALL);
    mails.length = 0;
    const [outcome] = await alert(b.orgId);
    expect(outcome).toEqual({ status: 'pending' });
    expect(mails).toHaveLength(0);

    // A channel that sent its hour's worth sends nothing more, whoever its recipients are.
    const c = await createTenant(db());
    const busy = await emailChannel(c, [`fresh-${newId('req')}@example.com`]);
    await db().insert(notificationSends).values(Array.from({ length: SENDS_PER_CHANNEL_PER_HOUR }, (_, i) => ({
      id: newId('nsend'), orgId: c.orgId, channelId: busy, recipient: emailRecipient(`r${i}@example.com`), sentAt: new Date(),
    })));
    expect(await alert(c.orgId)).toEqual([{ status: 'pending' }]);
    expect(mails).toHaveLength(0);
  });

  it('counts every spelling of one mailbox as one recipient: `+tag` and case cannot mail it past its limits', async () => {
    const t = await createTenant(db());
    const local = `victim-${newId('req')}`.toLowerCase();
    // 20 spellings of one mailbox in one channel (its most addresses), and 5 more in a second.
    await emailChannel(t, Array.from({ length: 20 }, (_, i) => `${local}+${i}@Example.com`));
    await emailChannel(t, Array.from({ length: 5 }, (_, i) => `${i % 2 ? local.toUpperCase() : local}+x${i}@example.com`));
    mails.length = 0;
    // One alert: one mail a channel, not one a spelling.
    await alert(t.orgId);
    expect(mails).toHaveLength(2);
    // Alerts past the mailbox's hour: at most 20 mails reach it, whichever spellings they name.
    for (let i = 0; i < 14; i++) await alert(t.orgId);
    expect(mails).toHaveLength(SENDS_PER_RECIPIENT_PER_HOUR);
    expect(await db().select({ n: count() }).from(notificationSends).where(eq(notificationSends.recipient, emailRecipient(`${local}@example.com`)))).toEqual([{ n: SENDS_PER_RECIPIENT_PER_HOUR }]);
  });

  it('retries only the addresses a failed attempt did not reach', async () => {
    const t = await createTenant(db());
    await emailChannel(t, ['ok@example.com', 'bounces@example.com']);
    const sent: string[] = [];
    const flaky = createWebhookDeliveryActivities({
      db: db(), clock: systemClock, sealer: createSealer(keyring()), dispatcher: createGuardedDispatcher({ allowPrivateNetwork: true }),
      mailer: async (message) => {
        sent.push(message.to[0]!);
        return message.to[0] === 'bounces@example.com' && sent.length < 3 ? { ok: false, status: null, error: 'mailbox busy' } : { ok: true, status: null, error: null };
      },
      unsubscribe: { publicUrl: f.api.url, key: deriveKey(keyring(), UNSUBSCRIBE_KEY_PURPOSE) },
    });
    const { deliveries } = await recordDetection(db(), detection(t.orgId, `m-${newId('req')}`), new Date(), { publicUrl: f.api.url });
    const [delivery] = deliveries;
    expect(await flaky.attemptDelivery({ deliveryId: delivery!.id, attempt: 1, nextAttemptInMs: 60_000 })).toEqual({ status: 'pending' });
    expect(await flaky.attemptDelivery({ deliveryId: delivery!.id, attempt: 2, nextAttemptInMs: 60_000 })).toEqual({ status: 'succeeded' });
    expect(sent).toEqual(['ok@example.com', 'bounces@example.com', 'bounces@example.com']);
  });

  it('takes the limits before sending, so 200 deliveries at once never send more than a limit allows', async () => {
    // A pool of its own, wide enough that the deliveries really count and send side by side. The
    // 200 wait their turn for its 16 connections: on a busy machine longer than the 5 s a
    // process waits for Postgres itself (where a worker's activity would be retried instead).
    const wide = connectDatabase(process.env.DATABASE_URL!, { max: 16, connectTimeoutMs: 120_000 });
    const sent: string[] = [];
    const racing = createWebhookDeliveryActivities({
      db: wide.db, clock: systemClock, sealer: createSealer(keyring()), dispatcher: createGuardedDispatcher({ allowPrivateNetwork: true }),
      mailer: async (message) => {
        sent.push(message.to[0]!);
        return { ok: true, status: null, error: null };
      },
      unsubscribe: { publicUrl: f.api.url, key: deriveKey(keyring(), UNSUBSCRIBE_KEY_PURPOSE) },
    });
    /** `n` alerts of the organization queued, one delivery each (a fresh model each). */
    const queued = async (orgId: string, n: number) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) ids.push(...(await recordDetection(db(), detection(orgId, `m-${newId('req')}`), new Date(), { publicUrl: f.api.url })).deliveries.map((d) => d.id));
      return ids;
    };
    const attemptAll = (ids: string[]) => Promise.all(ids.map((id) => racing.attemptDelivery({ deliveryId: id, attempt: 1, nextAttemptInMs: 60_000 })));
    const mailsTo = (address: string) => sent.filter((to) => to === address).length;
    try {
      // One organization, 200 alerts at once to one address: its 20 an hour; the rest wait.
      const a = await createTenant(db());
      const one = `one-${newId('req')}@example.com`;
      await emailChannel(a, [one]);
      const outcomes = await attemptAll(await queued(a.orgId, 200));
      expect(mailsTo(one)).toBe(SENDS_PER_RECIPIENT_PER_HOUR);
      expect(outcomes.filter((o) => o.status === 'succeeded')).toHaveLength(SENDS_PER_RECIPIENT_PER_HOUR);
      expect(outcomes.filter((o) => o.status === 'pending')).toHaveLength(200 - SENDS_PER_RECIPIENT_PER_HOUR);

      // Four organizations, 50 alerts each at once to one address: 60 from all together, at most 20 from each.
      const shared = `many-${newId('req')}@example.com`;
      const orgs = [await createTenant(db()), await createTenant(db()), await createTenant(db()), await createTenant(db())];
      const ids: string[][] = [];
      for (const t of orgs) {
        await emailChannel(t, [shared]);
        ids.push(await queued(t.orgId, 50));
      }
      await attemptAll(ids.flat());
      expect(mailsTo(shared)).toBe(SENDS_PER_RECIPIENT_PER_HOUR_ALL);
      const perOrg = await db().select({ orgId: notificationSends.orgId, n: count() }).from(notificationSends)
        .where(and(eq(notificationSends.recipient, emailRecipient(shared)), eq(notificationSends.state, 'sent'))).groupBy(notificationSends.orgId);
      expect(perOrg.reduce((sum, o) => sum + o.n, 0)).toBe(SENDS_PER_RECIPIENT_PER_HOUR_ALL);
      for (const o of perOrg) expect(o.n).toBeLessThanOrEqual(SENDS_PER_RECIPIENT_PER_HOUR);

      // One channel, 200 alerts at once to two addresses: the channel's 30, not twice 20.
      const c = await createTenant(db());
      const pair = [`p-${newId('req')}@example.com`, `q-${newId('req')}@example.com`];
      await emailChannel(c, pair);
      await attemptAll(await queued(c.orgId, 200));
      expect(mailsTo(pair[0]!) + mailsTo(pair[1]!)).toBe(SENDS_PER_CHANNEL_PER_HOUR);
      for (const address of pair) expect(mailsTo(address)).toBeLessThanOrEqual(SENDS_PER_RECIPIENT_PER_HOUR);
    } finally {
      await wide.close();
    }
  });

  it('gives a recipient\'s slot back when the mail server refused the mail, and a retry takes no second one', async () => {
    const t = await createTenant(db());
    const address = `slot-${newId('req')}@example.com`;
    await emailChannel(t, [address]);
    // The address has room for one more this hour.
    await db().insert(notificationSends).values(Array.from({ length: SENDS_PER_RECIPIENT_PER_HOUR - 1 }, () => ({
      id: newId('nsend'), orgId: t.orgId, channelId: 'nch_elsewhere', recipient: emailRecipient(address), sentAt: new Date(),
    })));
    let refuse = true;
    const flaky = createWebhookDeliveryActivities({
      db: db(), clock: systemClock, sealer: createSealer(keyring()), dispatcher: createGuardedDispatcher({ allowPrivateNetwork: true }),
      mailer: async () => (refuse ? { ok: false, status: null, error: 'mailbox busy' } : { ok: true, status: null, error: null }),
      unsubscribe: { publicUrl: f.api.url, key: deriveKey(keyring(), UNSUBSCRIBE_KEY_PURPOSE) },
    });
    const [delivery] = (await recordDetection(db(), detection(t.orgId, `m-${newId('req')}`), new Date(), { publicUrl: f.api.url })).deliveries;
    const held = () => db().select({ state: notificationSends.state }).from(notificationSends).where(eq(notificationSends.deliveryId, delivery!.id));
    expect(await flaky.attemptDelivery({ deliveryId: delivery!.id, attempt: 1, nextAttemptInMs: 60_000 })).toEqual({ status: 'pending' });
    expect(await held()).toEqual([]);
    // An attempt lost mid-send leaves its slot held; the next attempt of the delivery takes it over instead of finding the hour full.
    await db().insert(notificationSends).values({ id: newId('nsend'), orgId: t.orgId, channelId: 'nch_elsewhere', deliveryId: delivery!.id, recipient: emailRecipient(address), state: 'taken', sentAt: new Date() });
    refuse = false;
    expect(await flaky.attemptDelivery({ deliveryId: delivery!.id, attempt: 2, nextAttemptInMs: 60_000 })).toEqual({ status: 'succeeded' });
    expect(await held()).toEqual([{ state: 'sent' }]);
    const [{ n } = { n: 0 }] = await db().select({ n: count() }).from(notificationSends).where(eq(notificationSends.recipient, emailRecipient(address)));
    expect(n).toBe(SENDS_PER_RECIPIENT_PER_HOUR);
  });

  it('caps the channels of an organization', async () => {
    const t = await createTenant(db());
    const client = manageClient(f.api.url, t.token);
    for (let i = 0; i < MAX_CHANNELS_PER_ORGANIZATION; i++) {
      expect((await client.post('/notification_channels', { kind: 'email', label: `c${i}`, emails: ['x@example.com'] })).status).toBe(201);
    }
    const refused = await client.post<Loose>('/notification_channels', { kind: 'email', label: 'one more', emails: ['x@example.com'] });
    expect([refused.status, refused.body.error?.type]).toEqual([400, 'invalid_request_error']);
    expect(refused.body.error?.message).toContain(String(MAX_CHANNELS_PER_ORGANIZATION));
  });

  it('disables a chat app channel whose address keeps answering 4xx, with an audit event', async () => {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(404).end('no such webhook'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const t = await createTenant(db());
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/revoked`;
      const channel = await manageClient(f.api.url, t.token).post<Loose>('/notification_channels', { kind: 'chatapp', label: 'room', chatapp_url: url });
      expect(channel.status).toBe(201);
      await db().insert(notificationRules).values({ id: newId('nrule'), orgId: t.orgId, eventType: 'unpriced.traffic', channelId: channel.body.id });
      for (let i = 0; i < 3; i++) expect(await alert(t.orgId)).toEqual([{ status: 'pending' }]);
      const [row] = await db().select().from(notificationChannels).where(eq(notificationChannels.id, channel.body.id));
      expect([row!.status, row!.consecutiveRefusals]).toEqual(['disabled', 3]);
      const audits = await db().select().from(auditEvents).where(and(eq(auditEvents.orgId, t.orgId), eq(auditEvents.action, 'notification_channels.disabled')));
      expect(audits).toHaveLength(1);
      // A disabled channel is not sent to (and takes no new alerts).
      expect(await alert(t.orgId)).toEqual([]);
    } finally {
      server.close();
    }
  });
});
