import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { appendAudit } from '../audit';
import type { Database, Executor, Transaction } from '../db/client';
import { emailSuppressions, notificationChannels } from '../db/schema';
import { mailbox } from './mailbox';
import type { AlertAddress, UnsubscribeLink } from './unsubscribe';

/**
 * Unsubscribing is the address's, for the whole organization (issue 52): once an address used
 * the link in an alert email, no channel of that organization mails it, whichever channel lists
 * it and whenever that channel was made, until the address re-subscribes through the link the
 * unsubscribe page gave it. The tenant has no way to clear it.
 */

/** The mailboxes (mailbox) among `emails` the organization must not mail. */
export async function suppressedAmong(db: Executor, orgId: string, emails: readonly string[]): Promise<Set<string>> {
  const addresses = [...new Set(emails.map(mailbox))];
  if (addresses.length === 0) return new Set();
  const rows = await db.select({ address: emailSuppressions.address }).from(emailSuppressions)
    .where(and(eq(emailSuppressions.orgId, orgId), inArray(emailSuppressions.address, addresses)));
  return new Set(rows.map((r) => r.address));
}

/** The organization an unsubscribe link is for; an older link names only its channel (null: the channel is gone). */
export async function addressOfLink(db: Executor, link: UnsubscribeLink): Promise<AlertAddress | null> {
  if (link.orgId !== null) return link;
  const [channel] = await db.select({ orgId: notificationChannels.orgId }).from(notificationChannels).where(eq(notificationChannels.id, link.channelId));
  return channel ? { orgId: channel.orgId, channelId: link.channelId, email: link.email } : null;
}

/** Stops every alert email of the organization to the address; doing it again changes nothing. */
export async function unsubscribeAddress(db: Database, a: AlertAddress, now: Date): Promise<void> {
  await db.transaction(async (tx) => {
    const [added] = await tx.insert(emailSuppressions).values({ orgId: a.orgId, address: mailbox(a.email), channelId: a.channelId, createdAt: now })
      .onConflictDoNothing().returning({ orgId: emailSuppressions.orgId });
    if (added) await recordOnChannels(tx, a, 'notification_channels.unsubscribed', now);
  });
}

/** Lets the organization's alert email reach the address again; only its own link leads here. */
export async function resubscribeAddress(db: Database, a: AlertAddress, now: Date): Promise<void> {
  await db.transaction(async (tx) => {
    const [removed] = await tx.delete(emailSuppressions)
      .where(and(eq(emailSuppressions.orgId, a.orgId), eq(emailSuppressions.address, mailbox(a.email)))).returning({ orgId: emailSuppressions.orgId });
    if (removed) await recordOnChannels(tx, a, 'notification_channels.resubscribed', now);
  });
}

/**
 * Each email channel of the organization that lists the address reads differently now (its
 * `unsubscribed_emails`): it moves to its next version, with an audit event. When none lists it
 * any more, the event names the channel whose email carried the link.
 */
async function recordOnChannels(tx: Transaction, a: AlertAddress, action: string, now: Date): Promise<void> {
  const address = mailbox(a.email);
  const channels = await tx.select({ id: notificationChannels.id, emails: notificationChannels.emails }).from(notificationChannels)
    .where(and(eq(notificationChannels.orgId, a.orgId), eq(notificationChannels.kind, 'email'))).orderBy(asc(notificationChannels.id));
  const listing = channels.filter((c) => (c.emails ?? []).some((e) => mailbox(e) === address));
  const actor = { tokenId: null, memberId: null };
  if (listing.length === 0) {
    await appendAudit(tx, { orgId: a.orgId, actor, action, resourceType: 'notification_channels', resourceId: a.channelId, beforeVersion: null, afterVersion: null, detail: { email: a.email } });
    return;
  }
  // One at a time in id order: two addresses unsubscribing at once lock the channels in the same order.
  for (const { id } of listing) {
    const [after] = await tx.update(notificationChannels).set({ version: sql`${notificationChannels.version} + 1`, updatedAt: now })
      .where(eq(notificationChannels.id, id)).returning({ version: notificationChannels.version });
    if (!after) continue;
    await appendAudit(tx, {
      orgId: a.orgId, actor, action, resourceType: 'notification_channels', resourceId: id, beforeVersion: after.version - 1, afterVersion: after.version, detail: { email: a.email },
    });
  }
}
