import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The one-click unsubscribe of an alert email (RFC 8058): a link that names one address of one
 * channel, signed so it cannot be forged for another. `List-Unsubscribe` carries it, with
 * `List-Unsubscribe-Post: List-Unsubscribe=One-Click` so mail clients may POST to it directly.
 */
export type Unsubscription = { channelId: string; email: string };

const encode = (u: Unsubscription) => Buffer.from(JSON.stringify([u.channelId, u.email])).toString('base64url');
const mac = (key: Buffer, payload: string) => createHmac('sha256', key).update(`unsubscribe:${payload}`).digest('base64url');

export function unsubscribeToken(key: Buffer, u: Unsubscription): string {
  const payload = encode(u);
  return `${payload}.${mac(key, payload)}`;
}

/** The address and channel a token names, or null when it was not made with this key. */
export function readUnsubscribeToken(key: Buffer, token: string): Unsubscription | null {
  const [payload, signature, ...rest] = token.split('.');
  if (!payload || !signature || rest.length > 0 || token.length > 2048) return null;
  const expected = Buffer.from(mac(key, payload));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
  try {
    const [channelId, email] = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown[];
    return typeof channelId === 'string' && typeof email === 'string' ? { channelId, email } : null;
  } catch {
    return null;
  }
}

/** The headers an alert email carries for one recipient. */
export function unsubscribeHeaders(publicUrl: string, key: Buffer, u: Unsubscription): Record<string, string> {
  return {
    'List-Unsubscribe': `<${publicUrl}/unsubscribe/${unsubscribeToken(key, u)}>`,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  };
}

/** The key the tokens are signed with, derived from the sealing keyring for this one purpose. */
export const UNSUBSCRIBE_KEY_PURPOSE = 'alert-unsubscribe';
