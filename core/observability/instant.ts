import { GatewayError } from '../errors';

const ISO_INSTANT = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?)?$/i;

/**
 * `from` and `to` of every observability read (issue 13): ISO 8601 (a date, or a time with or
 * without a zone; no zone means UTC) or Unix seconds. Null when the text is neither.
 */
export function toInstant(text: string): Date | null {
  if (/^\d{1,11}(?:\.\d{1,6})?$/.test(text)) return new Date(Math.round(Number(text) * 1000));
  const m = ISO_INSTANT.exec(text);
  if (!m) return null;
  const [, date, time, fraction, zone] = m;
  const iso = time === undefined ? `${date}T00:00:00Z` : `${date}T${time}${fraction ? `.${fraction.slice(0, 3)}` : ''}${zone ?? 'Z'}`;
  const parsed = new Date(iso);
  return Number.isNaN(parsed.getTime()) ? null : parsed;
}

/** `toInstant`, or 400 `invalid_request_error` naming the parameter. */
export function parseInstant(name: string, text: string): Date {
  const at = toInstant(text);
  if (!at) throw new GatewayError('invalid_request', `Invalid \`${name}\`: \`${text}\` is neither an ISO 8601 time nor Unix seconds.`);
  return at;
}
