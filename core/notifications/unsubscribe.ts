import { signingKeyList, type SigningKeys } from '../crypto/sealing';
import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The links an alert email's recipient uses without signing in: the one-click unsubscribe
 * (RFC 8058; `List-Unsubscribe` carries it, with `List-Unsubscribe-Post:
 * List-Unsubscribe=One-Click` so mail clients may POST to it directly) and the re-subscribe link
 * the unsubscribe page offers. Each names one address of one organization (and the channel
 * whose email carried it), signed so it cannot be made for another address: only someone who
 * received the address's mail holds one, never the tenant that lists the address.
 */
export type AlertAddress = { orgId: string; channelId: string; email: string };

/**
 * What an unsubscribe link names. Links in email sent before unsubscribing became an
 * organization's (issue 52) name only the channel; the caller finds its organization.
 */
export type UnsubscribeLink = AlertAddress | { orgId: null; channelId: string; email: string };

/** Each kind of link is signed for its own purpose, so one never passes for the other. */
const UNSUBSCRIBE = 'unsubscribe-address';
const RESUBSCRIBE = 'resubscribe-address';
/** The purpose of the links sent before issue 52, which named `[channelId, email]`. */
const CHANNEL_UNSUBSCRIBE = 'unsubscribe';

const MAX_TOKEN_LENGTH = 2048;

const mac = (key: Buffer, purpose: string, payload: string) => createHmac('sha256', key).update(`${purpose}:${payload}`).digest('base64url');

function sign(keys: SigningKeys, purpose: string, fields: string[]): string {
  const payload = Buffer.from(JSON.stringify(fields)).toString('base64url');
  return `${payload}.${mac(signingKeyList(keys)[0]!, purpose, payload)}`;
}

/** The string fields a token signed for `purpose` carries, or null when it was not made so. */
function verify(keys: SigningKeys, purpose: string, token: string, arity: number): string[] | null {
  const [payload, signature, ...rest] = token.split('.');
  if (!payload || !signature || rest.length > 0 || token.length > MAX_TOKEN_LENGTH) return null;
  const given = Buffer.from(signature);
  const signedBy = (key: Buffer) => {
    const expected = Buffer.from(mac(key, purpose, payload));
    return expected.length === given.length && timingSafeEqual(expected, given);
  };
  if (!signingKeyList(keys).some(signedBy)) return null;
  try {
    const fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown;
    return Array.isArray(fields) && fields.length === arity && fields.every((f) => typeof f === 'string') ? (fields as string[]) : null;
  } catch {
    return null;
  }
}

export function unsubscribeToken(key: SigningKeys, a: AlertAddress): string {
  return sign(key, UNSUBSCRIBE, [a.orgId, a.channelId, a.email]);
}

/** What an unsubscribe link names (an older link: only its channel), or null when it was not made with this key. */
export function readUnsubscribeToken(key: SigningKeys, token: string): UnsubscribeLink | null {
  const current = verify(key, UNSUBSCRIBE, token, 3);
  if (current) return { orgId: current[0]!, channelId: current[1]!, email: current[2]! };
  const older = verify(key, CHANNEL_UNSUBSCRIBE, token, 2);
  return older ? { orgId: null, channelId: older[0]!, email: older[1]! } : null;
}

export function resubscribeToken(key: SigningKeys, a: AlertAddress): string {
  return sign(key, RESUBSCRIBE, [a.orgId, a.channelId, a.email]);
}

export function readResubscribeToken(key: SigningKeys, token: string): AlertAddress | null {
  const fields = verify(key, RESUBSCRIBE, token, 3);
  return fields ? { orgId: fields[0]!, channelId: fields[1]!, email: fields[2]! } : null;
}

/** The headers an alert email carries for one recipient. */
export function unsubscribeHeaders(publicUrl: string, key: SigningKeys, a: AlertAddress): Record<string, string> {
  return {
    'List-Unsubscribe': `<${publicUrl}/unsubscribe/${unsubscribeToken(key, a)}>`,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  };
}

/** The key the tokens are signed with, derived from the sealing keyring for this one purpose. */
export const UNSUBSCRIBE_KEY_PURPOSE = 'alert-unsubscribe';
