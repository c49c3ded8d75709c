import { createHash } from 'node:crypto';
import { and, count, eq, gt, inArray, sql } from 'drizzle-orm';
import type { Database, Executor } from '../db/client';
import { notificationSends } from '../db/schema';
import { newId } from '../ids';
import { mailbox } from './mailbox';

/**
 * Bounds on what alert channels can send, so no tenant turns the gateway into a relay: channels
 * per organization, alerts per channel an hour, and alerts per recipient an hour counted across
 * every organization (an address named by many tenants still hears at most this many).
 */
export const MAX_CHANNELS_PER_ORGANIZATION = 20;
/** One channel's sends an hour: a chat app post, or an email to one of its addresses. */
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

/**
 * A recipient as counted: an email address's mailbox (mailbox.ts: every `+tag` spelling of one
 * mailbox is one recipient), or a chat app address by its hash (it is a secret).
 */
export function emailRecipient(email: string): string {
  return `email:${mailbox(email)}`;
}
export function chatappRecipient(url: string): string {
  return `chatapp:${createHash('sha256').update(url).digest('hex')}`;
}

/** A slot this delivery holds for one recipient: send, then settle it (settleSendSlots). */
export type SendSlot = { id: string; recipient: string };

export type SendSlots = {
  /** Recipients the delivery now holds a slot for, in the order asked. */
  taken: SendSlot[];
  /** Recipients an earlier attempt of the delivery reached: not sent to again. */
  reached: string[];
  /** Whether the channel's hour is what left some recipients waiting (else their own hour). */
  channelFull: boolean;
};

/** An advisory lock key per channel and per recipient: 64 bits of a hash, so distinct ones rarely share a lock. */
function lockKey(name: string): bigint {
  return createHash('sha256').update(`notification_sends:${name}`).digest().readBigInt64BE(0);
}

/**
 * Takes the delivery's slots under the hourly limits before anything is sent: the channel's
 * (30 sends), and each recipient's (20 from the organization, 60 from all of them). The count
 * and the new slots happen in one short transaction holding an advisory lock per channel and per
 * recipient, so deliveries made at the same moment take turns and never see the same room twice
 * (200 at once to one address send 20, not 200). The lock is released at commit, before any
 * mail goes out (DESIGN 6.9). A slot counts from when it is taken; a send that did not go out
 * gives it back (settleSendSlots).
 *
 * A retried delivery takes no second slot for a recipient: one it reached is skipped, and a slot
 * its earlier attempt left held (a worker lost mid-send) is given back in the same transaction
 * before the room is counted, so it is taken again at most once.
 */
export async function takeSendSlots(db: Database, ask: { orgId: string; channelId: string; deliveryId: string; recipients: readonly string[]; now: Date }): Promise<SendSlots> {
  const recipients = [...new Set(ask.recipients)];
  if (recipients.length === 0) return { taken: [], reached: [], channelFull: false };
  const since = new Date(ask.now.getTime() - HOUR_MS);
  return db.transaction(async (tx) => {
    // In ascending order, so two deliveries sharing a channel or recipients never wait on each other in a circle.
    const keys = [...new Set([lockKey(`channel:${ask.channelId}`), ...recipients.map((r) => lockKey(`recipient:${r}`))])].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    // One statement; Postgres evaluates the select list left to right.
    await tx.execute(sql`select ${sql.join(keys.map((k) => sql`pg_advisory_xact_lock(${k.toString()}::bigint)`), sql`, `)}`);

    const own = await tx.select({ recipient: notificationSends.recipient, state: notificationSends.state }).from(notificationSends)
      .where(and(eq(notificationSends.deliveryId, ask.deliveryId), inArray(notificationSends.recipient, recipients)));
    const reached = new Set(own.filter((s) => s.state === 'sent').map((s) => s.recipient));
    if (own.some((s) => s.state === 'taken')) {
      await tx.delete(notificationSends).where(and(eq(notificationSends.deliveryId, ask.deliveryId), inArray(notificationSends.recipient, recipients), eq(notificationSends.state, 'taken')));
    }
    const waiting = recipients.filter((r) => !reached.has(r));
    if (waiting.length === 0) return { taken: [], reached: [...reached], channelFull: false };

    const [channel] = await tx.select({ n: count() }).from(notificationSends).where(and(eq(notificationSends.channelId, ask.channelId), gt(notificationSends.sentAt, since)));
    let channelRoom = SENDS_PER_CHANNEL_PER_HOUR - (channel?.n ?? 0);
    const counts = await tx.select({ recipient: notificationSends.recipient, all: count(), ours: sql<number>`count(*) filter (where ${notificationSends.orgId} = ${ask.orgId})::int` })
      .from(notificationSends).where(and(inArray(notificationSends.recipient, waiting), gt(notificationSends.sentAt, since))).groupBy(notificationSends.recipient);
    const sent = new Map(counts.map((c) => [c.recipient, c]));
    const taken: SendSlot[] = [];
    for (const recipient of waiting) {
      if (channelRoom <= 0) break;
      const { all = 0, ours = 0 } = sent.get(recipient) ?? {};
      if (ours >= SENDS_PER_RECIPIENT_PER_HOUR || all >= SENDS_PER_RECIPIENT_PER_HOUR_ALL) continue;
      taken.push({ id: newId('nsend'), recipient });
      channelRoom -= 1;
    }
    if (taken.length > 0) {
      await tx.insert(notificationSends).values(taken.map((slot) => ({
        id: slot.id, orgId: ask.orgId, channelId: ask.channelId, deliveryId: ask.deliveryId, recipient: slot.recipient, state: 'taken' as const, sentAt: ask.now,
      })));
    }
    return { taken, reached: [...reached], channelFull: channelRoom <= 0 && taken.length < waiting.length };
  });
}

/**
 * What became of the sends the slots were taken for: `sent` (reached: a retry skips it),
 * `failed` (the request went out and was refused: it counts, and a retry sends again), or
 * `released` (nothing went out, as when the mail server refused it: the slot is given back).
 */
export async function settleSendSlots(db: Executor, slots: ReadonlyArray<{ id: string; outcome: 'sent' | 'failed' | 'released' }>): Promise<void> {
  const ids = (outcome: string) => slots.filter((s) => s.outcome === outcome).map((s) => s.id);
  for (const state of ['sent', 'failed'] as const) {
    if (ids(state).length > 0) await db.update(notificationSends).set({ state }).where(and(inArray(notificationSends.id, ids(state)), eq(notificationSends.state, 'taken')));
  }
  if (ids('released').length > 0) await db.delete(notificationSends).where(and(inArray(notificationSends.id, ids('released')), eq(notificationSends.state, 'taken')));
}
