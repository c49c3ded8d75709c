import type { ProviderFailure } from './types';

/** The prefix of every provider-rejected message the client sees (spec 7). */
export const PROVIDER_REJECTED_PREFIX = 'Provider rejected the request: ';
const MAX_MESSAGE = 500;

const CREDENTIAL_LIKE = [
  /\b(?:sk|pk|rk|gwk|gwm|whsec|xai|gsk|csk|AIza)[-_][A-Za-z0-9_-]{6,}/g,
  /\bAIza[0-9A-Za-z_-]{10,}/g,
  /\bBearer\s+[^\s"',]+/gi,
  /\b(api[-_]?key|key|token|secret|password)(["']?\s*[:=]\s*["']?)[^\s"',&]+/gi,
  /\b[A-Za-z0-9+/_-]{32,}={0,2}/g,
];

/** Provider text made safe to show: one line, credential-like text redacted. */
export function cleanProviderText(text: string): string {
  // eslint-disable-next-line no-control-regex -- removing control characters is the point
  let out = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').replace(/\s+/g, ' ').trim();
  for (const pattern of CREDENTIAL_LIKE) {
    out = out.replace(pattern, (match, name?: string, sep?: string) => (typeof name === 'string' && typeof sep === 'string' ? `${name}${sep}[redacted]` : '[redacted]'));
  }
  return out;
}

/** `Provider rejected the request: <cleaned message>`, at most 500 characters. */
export function providerRejectedMessage(providerMessage: string): string {
  const message = PROVIDER_REJECTED_PREFIX + cleanProviderText(providerMessage);
  return message.length <= MAX_MESSAGE ? message : `${message.slice(0, MAX_MESSAGE - 1)}…`;
}

/** Seconds from a Retry-After header (seconds or HTTP date). */
export function retryAfterSeconds(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds));
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** Pulls a message out of the usual provider error bodies. */
export function providerMessage(body: unknown, fallback: string): string {
  if (typeof body === 'string') return body || fallback;
  const b = body as { error?: { message?: string } | string; message?: string } | null;
  if (b && typeof b.error === 'object' && typeof b.error.message === 'string') return b.error.message;
  if (b && typeof b.error === 'string') return b.error;
  if (b && typeof b.message === 'string') return b.message;
  return fallback;
}

const UNSUPPORTED_PARAM = /(?:unsupported|unrecognized|unknown|not supported|does not support|not permitted)[^'"`]*['"`]([a-z_]+)['"`]/i;
const SAFETY = /(content[_ ]?filter|safety|moderation|flagged)/i;

/**
 * The shared rules most providers follow: 401/403 credential, 429 rate limit, 5xx server,
 * 404 model not served, 400 split into moderation, an unsupported parameter, or invalid.
 */
export function classifyByStatus(
  status: number,
  body: unknown,
  headers: Record<string, string | string[] | undefined>,
  hints: { param?: string | null; code?: string | null } = {},
): ProviderFailure {
  const message = providerMessage(body, `HTTP ${status}`);
  if (status === 401 || status === 403) return { kind: 'credential', message, status };
  if (status === 429) return { kind: 'rate_limit', message, status, retryAfterSeconds: retryAfterSeconds(headers['retry-after']) };
  if (status === 408 || status === 504) return { kind: 'timeout', message, status };
  if (status >= 500) return { kind: 'server_error', message, status };
  if (status === 404) return { kind: 'model_not_served', message, status };
  if (hints.code === 'content_filter' || SAFETY.test(message)) return { kind: 'moderation', message, status };
  const param = hints.code === 'unsupported_parameter' && hints.param ? hints.param : UNSUPPORTED_PARAM.exec(message)?.[1];
  if (param) return { kind: 'unsupported_parameter', message, status, param };
  return { kind: 'invalid_request', message, status };
}
