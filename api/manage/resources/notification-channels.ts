import { and, count, eq, isNull, sql } from 'drizzle-orm';
import type { Executor } from '../../../core/db/client';
import { MAX_CHANNELS_PER_ORGANIZATION } from '../../../core/notifications/limits';
import { mailbox } from '../../../core/notifications/mailbox';
import { suppressedAmong } from '../../../core/notifications/suppressions';
import { z } from 'zod';
import { notificationChannels, webhookEndpoints } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { checkServiceUrl } from '../../../core/net/service-url';
import { unixTime } from './fields';
import { newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

/** A channel as read: its row, and which of its addresses unsubscribed from the organization. */
type ChannelRow = typeof notificationChannels.$inferSelect & { unsubscribedEmails: string[] };
type StoredChannel = typeof notificationChannels.$inferSelect;

const label = z.string().trim().min(1).max(80);
const chatappUrl = z.string().min(1).max(2048).describe('The chat app\'s incoming-webhook address: public HTTPS. Write-only, sealed; reads show only `chatapp_host`.');
const emails = z.array(z.email().max(254)).min(1).max(20);

const createSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('chatapp'), label, chatapp_url: chatappUrl }),
  z.strictObject({ kind: z.literal('webhook'), label, webhook_endpoint_id: z.string().min(1).max(64) }),
  z.strictObject({ kind: z.literal('email'), label, emails }),
]);

const patchSchema = z.strictObject({
  label: label.optional(),
  status: z.enum(['active', 'disabled']).optional(),
  chatapp_url: chatappUrl.optional(),
  emails: emails.optional(),
});

/** The sealed address and its host, after the same check as every address a customer chooses. */
function sealedChatapp(call: ResourceCall, id: string, url: string): { chatappUrlSealed: string; chatappHost: string } {
  const verdict = checkServiceUrl(url, { allowPrivateNetwork: call.services.allowPrivateNetwork });
  if (!verdict.ok) throw new GatewayError('invalid_request', `Invalid \`chatapp_url\`: it ${verdict.reason}.`);
  return {
    chatappUrlSealed: call.services.sealer.seal(url, { orgId: call.principal.orgId, recordId: id, field: 'chatapp_url' }),
    chatappHost: verdict.url.host,
  };
}

/**
 * The channels' addresses that used an alert email's unsubscribe link (core/notifications/
 * suppressions.ts): shown, so the tenant sees why they get nothing, but not writable.
 */
async function withUnsubscribed<T extends StoredChannel>(db: Executor, rows: T[]): Promise<Array<T & { unsubscribedEmails: string[] }>> {
  const emails = rows.flatMap((r) => r.emails ?? []);
  // Every row of a read is one organization's.
  const suppressed = rows.length > 0 && emails.length > 0 ? await suppressedAmong(db, rows[0]!.orgId, emails) : new Set<string>();
  return rows.map((r) => ({ ...r, unsubscribedEmails: (r.emails ?? []).filter((e) => suppressed.has(mailbox(e))) }));
}

/** Where alerts go (spec 2.6 notification channels): a webhook endpoint, a chat app, or email. */
export const notificationChannelsResource: ResourceType<ChannelRow> = {
  type: 'notification_channels',
  object: 'notification_channel',
  scope: 'alerts',
  table: notificationChannels,
  readSchema: z.object({
    kind: z.enum(['chatapp', 'webhook', 'email']),
    label: z.string(),
    status: z.enum(['active', 'disabled']),
    webhook_endpoint_id: z.string().nullable(),
    chatapp_host: z.string().nullable().describe('The host of the sealed chat app address; the address itself is never returned.'),
    emails: z.array(z.string()).nullable(),
    unsubscribed_emails: z.array(z.string()).describe('The channel\'s `emails` that used the one-click unsubscribe of an alert email: no channel of the organization mails them until they re-subscribe through their own link. Patching `emails` or making another channel does not change it.'),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    const query = db.select().from(notificationChannels).where(and(eq(notificationChannels.orgId, orgId), eq(notificationChannels.id, id)));
    const row = await selectOne(query, forUpdate);
    return row ? (await withUnsubscribed(db, [row]))[0]! : null;
  },

  async list(db, principal, page) {
    const listed = await newestFirst<StoredChannel>(db, notificationChannels, eq(notificationChannels.orgId, principal.orgId), page);
    const rows = await withUnsubscribed(db, listed.map((l) => l.row));
    return listed.map((l, i) => ({ row: rows[i]!, cursor: l.cursor }));
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const id = newId('nch');
    const orgId = call.principal.orgId;
    // Channels are bounded per organization (core/notifications/limits.ts); concurrent creates
    // of one organization take turns, so the bound is exact.
    await call.db.execute(sql`select pg_advisory_xact_lock(hashtext(${`notification_channels:${orgId}`}))`);
    const [{ n } = { n: 0 }] = await call.db.select({ n: count() }).from(notificationChannels).where(eq(notificationChannels.orgId, orgId));
    if (n >= MAX_CHANNELS_PER_ORGANIZATION) {
      throw new GatewayError('invalid_request', `An organization has at most ${MAX_CHANNELS_PER_ORGANIZATION} notification channels; remove one before adding another.`);
    }
    let fields: Partial<StoredChannel> = {};
    if (input.kind === 'chatapp') fields = sealedChatapp(call, id, input.chatapp_url);
    if (input.kind === 'email') fields = { emails: [...new Set(input.emails)] };
    if (input.kind === 'webhook') {
      const [endpoint] = await call.db.select({ id: webhookEndpoints.id }).from(webhookEndpoints)
        .where(and(eq(webhookEndpoints.orgId, orgId), eq(webhookEndpoints.id, input.webhook_endpoint_id), isNull(webhookEndpoints.deletedAt)));
      if (!endpoint) throw new GatewayError('invalid_request', 'Invalid `webhook_endpoint_id`: the organization has no such webhook endpoint.');
      fields = { webhookEndpointId: endpoint.id };
    }
    const [row] = await call.db.insert(notificationChannels).values({ id, orgId, kind: input.kind, label: input.label, ...fields }).returning();
    return { row: (await withUnsubscribed(call.db, [row!]))[0]!, auditDetail: { kind: input.kind } };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    if (input.chatapp_url !== undefined && row.kind !== 'chatapp') throw new GatewayError('invalid_request', 'Invalid `chatapp_url`: only a `chatapp` channel has one.');
    if (input.emails !== undefined && row.kind !== 'email') throw new GatewayError('invalid_request', 'Invalid `emails`: only an `email` channel has them.');
    return {
      ...(input.label !== undefined && { label: input.label }),
      ...(input.status !== undefined && { status: input.status }),
      ...(input.chatapp_url !== undefined && sealedChatapp(call, row.id, input.chatapp_url)),
      ...(input.emails !== undefined && { emails: [...new Set(input.emails)] }),
    };
  },

  // Its rules go with it (the foreign key cascades).
  async remove() {
    return 'delete';
  },

  present: (row) => ({
    kind: row.kind,
    label: row.label,
    status: row.status,
    webhook_endpoint_id: row.webhookEndpointId,
    chatapp_host: row.chatappHost,
    emails: row.emails,
    unsubscribed_emails: row.unsubscribedEmails,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
