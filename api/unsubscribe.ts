import Router from '@koa/router';
import type { Context } from 'koa';
import type { SigningKeys } from '../core/crypto/sealing';
import type { Database } from '../core/db/client';
import { GatewayError } from '../core/errors';
import { escapeHtml } from '../core/findings/messages';
import { mailbox } from '../core/notifications/mailbox';
import { addressOfLink, resubscribeAddress, suppressedAmong, unsubscribeAddress } from '../core/notifications/suppressions';
import { readResubscribeToken, readUnsubscribeToken, resubscribeToken, unsubscribeToken, type AlertAddress } from '../core/notifications/unsubscribe';
import type { GatewayState } from './context';

/**
 * The links of an alert email's recipient, reached without signing in. `POST /unsubscribe/{token}`
 * (what a mail client's RFC 8058 one-click sends, and the page's button) stops every alert email
 * of the organization to that address, from any channel, now or later made; its answer offers
 * the re-subscribe link, and so does the unsubscribe link's page while the address stays
 * unsubscribed. `POST /resubscribe/{token}` undoes it. A `GET` of either only shows its button,
 * so a link scanner that follows links changes nothing.
 */
export function unsubscribeRouter(deps: { db: Database; key: SigningKeys }): Router<GatewayState> {
  const router = new Router<GatewayState>();

  const unsubscribing = async (token: string): Promise<AlertAddress> => {
    const link = readUnsubscribeToken(deps.key, token);
    if (!link) throw new GatewayError('not_found', 'This unsubscribe link is not valid.');
    const address = await addressOfLink(deps.db, link);
    // An older link names only its channel: with the channel deleted, its organization is unknown.
    if (!address) throw new GatewayError('not_found', 'This unsubscribe link is no longer valid: its channel was deleted. Use the link in a newer alert email.');
    return address;
  };
  const resubscribing = (token: string): AlertAddress => {
    const address = readResubscribeToken(deps.key, token);
    if (!address) throw new GatewayError('not_found', 'This re-subscribe link is not valid.');
    return address;
  };
  const isSuppressed = async (a: AlertAddress) => (await suppressedAmong(deps.db, a.orgId, [a.email])).has(mailbox(a.email));
  // Relative, so the form works behind a proxy that serves the API under a path.
  const resubscribeForm = (a: AlertAddress, question: string) => form(`../resubscribe/${resubscribeToken(deps.key, a)}`, question, 'Re-subscribe');

  router.get('/unsubscribe/:token', async (ctx) => {
    const a = await unsubscribing(String(ctx.params.token));
    if (await isSuppressed(a)) {
      page(ctx, 'Unsubscribed', `<p>${escapeHtml(a.email)} gets no alert emails from this organization.</p>${resubscribeForm(a, 'Get them again?')}`);
      return;
    }
    page(ctx, 'Unsubscribe', form('', `Stop alert emails from this organization to ${escapeHtml(a.email)}?`, 'Unsubscribe'));
  });

  router.post('/unsubscribe/:token', async (ctx) => {
    const a = await unsubscribing(String(ctx.params.token));
    await unsubscribeAddress(deps.db, a, new Date());
    page(ctx, 'Unsubscribed', `<p>${escapeHtml(a.email)} will get no more alert emails from this organization, from any of its channels.</p>${resubscribeForm(a, 'Changed your mind?')}`);
  });

  router.get('/resubscribe/:token', (ctx) => {
    const a = resubscribing(String(ctx.params.token));
    page(ctx, 'Re-subscribe', form('', `Get alert emails from this organization at ${escapeHtml(a.email)} again?`, 'Re-subscribe'));
  });

  router.post('/resubscribe/:token', async (ctx) => {
    const a = resubscribing(String(ctx.params.token));
    await resubscribeAddress(deps.db, a, new Date());
    page(ctx, 'Re-subscribed', `<p>${escapeHtml(a.email)} will get this organization's alert emails again.</p>${form(`../unsubscribe/${unsubscribeToken(deps.key, a)}`, 'Stop them after all?', 'Unsubscribe')}`);
  });
  return router;
}

/** A one-button form that POSTs to `action` ('' is the page's own address). */
function form(action: string, question: string, button: string): string {
  return `<form method="post"${action ? ` action="${escapeHtml(action)}"` : ''}><p>${question}</p><button type="submit">${button}</button></form>`;
}

/** The pages carry signed links: kept out of caches and out of the Referer of whatever they lead to. */
function page(ctx: Context, title: string, body: string): void {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.type = 'html';
  ctx.body = `<!doctype html><meta charset="utf-8"><title>${title}</title>${body}`;
}
