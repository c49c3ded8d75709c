import { createHmac, timingSafeEqual } from 'node:crypto';

/** How old a signature may be before a receiver refuses it (spec 6.3, 8). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

function hmacHex(secret: string, t: number, payload: string): string {
  return createHmac('sha256', secret).update(`${t}.${payload}`, 'utf8').digest('hex');
}

/**
 * The `GW-Signature` header (spec 6.3): `t=<unix>,v1=<hex>` with one `v1` per secret still
 * signing, current first. Each is HMAC-SHA256 of `<t>.<raw body>` keyed with the whole
 * `whsec_...` secret, the construction Stripe's verifier also checks.
 */
export function signatureHeader(payload: string, secrets: readonly string[], t: number): string {
  return [`t=${t}`, ...secrets.map((s) => `v1=${hmacHex(s, t, payload)}`)].join(',');
}

export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}

/**
 * What a receiver runs on a delivery: the raw body exactly as received, the `GW-Signature`
 * header and its endpoint's secret. Answers the parsed event, or throws
 * `WebhookVerificationError` for a malformed header, no matching signature (compared in constant
 * time) or a `t` older than the tolerance.
 */
export function verifyWebhook<T = unknown>(
  rawBody: string | Buffer,
  header: string | null | undefined,
  secret: string,
  options: { toleranceSeconds?: number; now?: Date } = {},
): T {
  if (!header) throw new WebhookVerificationError('No GW-Signature header.');
  const payload = typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8');
  let t: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [name, value, ...rest] = part.trim().split('=');
    if (!name || value === undefined || rest.length > 0) throw new WebhookVerificationError('Malformed GW-Signature header.');
    if (name === 't') t = /^\d+$/.test(value) ? Number(value) : null;
    else if (name === 'v1') signatures.push(value);
  }
  if (t === null) throw new WebhookVerificationError('GW-Signature carries no valid timestamp.');
  if (signatures.length === 0) throw new WebhookVerificationError('GW-Signature carries no v1 signature.');
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (now - t > (options.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS)) throw new WebhookVerificationError('GW-Signature timestamp is too old.');
  const expected = Buffer.from(hmacHex(secret, t, payload), 'hex');
  const matches = signatures.some((s) => {
    const given = Buffer.from(s, 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookVerificationError('No signature matches the payload.');
  return JSON.parse(payload) as T;
}
