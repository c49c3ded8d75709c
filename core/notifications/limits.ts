import { createHash } from 'node:crypto';
import { and, count, eq, gt, sql } from 'drizzle-orm';
import type { Executor } from '../db/client';
import { notificationSends } from '../db/schema';
import { newId } from '../ids';

/**
 * Bounds on what alert channels can send, so no tenant turns the gateway into a relay: channels
 * per organization, alerts per channel an hour, and alerts per recipient an hour counted across
 * every organization (an address named by many tenants still hears at most this many).
 */
export const MAX_CHANNELS_PER_ORGANIZATION = 20;
export const SENDS_PER_CHANNEL_PER_HOUR = 30;
/** One organization's alerts to one recipient an hour. */
export const SENDS_PER_RECIPIENT_PER_HOUR = 20;
/**
 * Every organization's alerts to one recipient an hour: the bound against a relay, higher than
 * one organization's so that another tenant naming the address cannot use up its own alerts.
 */
export const SENDS_PER_RECIPIENT_PER_HOUR_ALL = 60;
/** A chat app address answering 4xx this many times in a row disables its channel. */
export const CHATAPP_REFUSALS_TO_DISABLE = 3;

const HOUR_MS = 3_600_000;

/** A recipient as counted: an email address (lower case), or a chat app address by its hash (it is a secret). */
export function emailRecipient(email: string): string {
  return `email:${email.trim().toLowerCase()}`;
}
export function chatappRecipient(url: string): string {
  return `chatapp:${createHash('sha256').update(url).digest('hex')}`;
}

/** Whether the channel may send now, and which recipients have room left this hour. */
export async function recipientsWithRoom(db: Executor, orgId: string, channelId: string, recipients: readonly string[], now: Date): Promise<{ channelFull: boolean; allowed: string[] }> {
  const since = new Date(now.getTime() - HOUR_MS);
  const [channel] = await db.select({ n: count() }).from(notificationSends).where(and(eq(notificationSends.channelId, channelId), gt(notificationSends.sentAt, since)));
  if ((channel?.n ?? 0) >= SENDS_PER_CHANNEL_PER_HOUR) return { channelFull: true, allowed: [] };
  const allowed: string[] = [];
  for (const recipient of recipients) {
    const [sent] = await db.select({ all: count(), ours: sql<number>`count(*) filter (where ${notificationSends.orgId} = ${orgId})::int` }).from(notificationSends)
      .where(and(eq(notificationSends.recipient, recipient), gt(notificationSends.sentAt, since)));
    if ((sent?.ours ?? 0) < SENDS_PER_RECIPIENT_PER_HOUR && (sent?.all ?? 0) < SENDS_PER_RECIPIENT_PER_HOUR_ALL) allowed.push(recipient);
  }
  return { channelFull: false, allowed };
}

/** The recipients a delivery already reached, on an earlier attempt. */
export async function recipientsSentFor(db: Executor, deliveryId: string): Promise<Set<string>> {
  const rows = await db.select({ recipient: notificationSends.recipient }).from(notificationSends).where(eq(notificationSends.deliveryId, deliveryId));
  return new Set(rows.map((r) => r.recipient));
}

export async function recordSends(db: Executor, orgId: string, channelId: string, deliveryId: string, recipients: readonly string[], now: Date): Promise<void> {
  if (recipients.length === 0) return;
  await db.insert(notificationSends).values(recipients.map((recipient) => ({ id: newId('nsend'), orgId, channelId, deliveryId, recipient, sentAt: now })));
}
