import Router from '@koa/router';
import { and, eq, sql } from 'drizzle-orm';
import { appendAudit } from '../core/audit';
import type { Database } from '../core/db/client';
import { notificationChannels } from '../core/db/schema';
import { GatewayError } from '../core/errors';
import { readUnsubscribeToken } from '../core/notifications/unsubscribe';
import { escapeHtml } from '../core/findings/messages';
import type { GatewayState } from './context';

/**
 * The one-click unsubscribe of alert emails (RFC 8058), reached from an email's
 * `List-Unsubscribe` link without signing in: `POST /unsubscribe/{token}` (what a mail client's
 * one-click sends, and the page's button) stops that address for that channel, recorded on the
 * channel and audited; `GET` shows the button, so a link scanner that follows links changes nothing.
 */
export function unsubscribeRouter(deps: { db: Database; key: Buffer }): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const read = (token: string) => {
    const found = readUnsubscribeToken(deps.key, token);
    if (!found) throw new GatewayError('not_found', 'This unsubscribe link is not valid.');
    return found;
  };

  router.get('/unsubscribe/:token', (ctx) => {
    const { email } = read(String(ctx.params.token));
    ctx.type = 'html';
    ctx.body = `<!doctype html><meta charset="utf-8"><title>Unsubscribe</title><form method="post"><p>Stop alert emails to ${escapeHtml(email)} from this channel?</p><button type="submit">Unsubscribe</button></form>`;
  });

  router.post('/unsubscribe/:token', async (ctx) => {
    const { channelId, email } = read(String(ctx.params.token));
    await deps.db.transaction(async (tx) => {
      const [channel] = await tx.select().from(notificationChannels).where(eq(notificationChannels.id, channelId)).for('update');
      if (!channel || channel.unsubscribedEmails.some((e) => e.toLowerCase() === email.toLowerCase())) return;
      const [after] = await tx.update(notificationChannels)
        .set({ unsubscribedEmails: sql`array_append(${notificationChannels.unsubscribedEmails}, ${email})`, version: sql`${notificationChannels.version} + 1`, updatedAt: new Date() })
        .where(and(eq(notificationChannels.id, channelId))).returning();
      await appendAudit(tx, {
        orgId: channel.orgId, actor: { tokenId: null, memberId: null }, action: 'notification_channels.unsubscribed', resourceType: 'notification_channels', resourceId: channel.id,
        beforeVersion: channel.version, afterVersion: after!.version, detail: { email },
      });
    });
    ctx.type = 'html';
    ctx.body = `<!doctype html><meta charset="utf-8"><title>Unsubscribed</title><p>${escapeHtml(email)} will get no more alert emails from this channel.</p>`;
  });
  return router;
}
