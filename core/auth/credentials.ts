/**
 * Recognisable prefixes let each API refuse the other's credential with a clear message
 * (a management token on /v1, a gateway key on /manage/v1) and let secret scanners find leaks.
 */
export const GATEWAY_KEY_PREFIX = 'gwk_';
export const MANAGEMENT_TOKEN_PREFIX = 'gwm_';
/** How many leading characters of a secret are kept for display. */
export const DISPLAY_PREFIX_LENGTH = 10;

const BEARER = /^Bearer\s+(\S+)\s*$/i;

export type BearerParse = { kind: 'missing' } | { kind: 'malformed' } | { kind: 'present'; secret: string };

export function parseBearer(header: string | undefined): BearerParse {
  if (!header) return { kind: 'missing' };
  const match = BEARER.exec(header);
  return match ? { kind: 'present', secret: match[1]! } : { kind: 'malformed' };
}
