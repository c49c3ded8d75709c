/**
 * What the finding detectors share: robust statistics (median and MAD, which a single spike or
 * a few missing hours do not drag the way a mean and standard deviation are dragged), the time
 * units they count in, and the few formatters their one-line summaries use. Everything here is
 * pure: time comes in as arguments, never from the clock.
 */

export const MINUTE_MS = 60_000;
export const HOUR_MS = 60 * MINUTE_MS;
export const DAY_MS = 24 * HOUR_MS;
export const WEEK_MS = 7 * DAY_MS;

/** The middle value, or the mean of the two middle ones for an even count; NaN for no values. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = values.slice().sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Median absolute deviation from `center` (normally the values' median). */
export function mad(values: readonly number[], center: number): number {
  return median(values.map((v) => Math.abs(v - center)));
}

/** The start of the UTC hour `d` falls in. */
export function floorToHour(d: Date): Date {
  return new Date(Math.floor(d.getTime() / HOUR_MS) * HOUR_MS);
}

/** The start of the UTC day `d` falls in. */
export function floorToDay(d: Date): Date {
  return new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);
}

/**
 * `value >= bound` for numbers that come out of float arithmetic: 0.15 - 0.05 is
 * 0.09999999999999998, and a rise from 5% to 15% must count as the ten points it is.
 */
export function reaches(value: number, bound: number): boolean {
  return value >= bound - 1e-9 * Math.max(1, Math.abs(bound));
}

// ---- Text for summaries ----

const DOLLARS = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' });
/** For amounts that round to $0.00 but are not zero: a summary never says $0 of a real cost. */
const SMALL_DOLLARS = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumSignificantDigits: 2 });

/**
 * `$42.10`, `$1,234.00`, `-$5.00`. `maxFractionDigits` above 2 keeps small prices exact
 * (`$0.075` per million tokens); a non-zero amount that would show as `$0.00` keeps two
 * significant digits instead (`$0.0042`).
 */
export function formatDollars(value: number, maxFractionDigits = 2): string {
  if (maxFractionDigits > 2) {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumFractionDigits: maxFractionDigits }).format(value);
  }
  if (value !== 0 && Math.abs(value) < 0.005) return SMALL_DOLLARS.format(value);
  return DOLLARS.format(value);
}

/** `1,234`. */
export function formatCount(value: number): string {
  return value.toLocaleString('en-US');
}

/** A fraction as a percentage with at most one decimal: 0.125 is `12.5%`, 0.6 is `60%`. */
export function formatPercent(fraction: number): string {
  return `${Number((fraction * 100).toFixed(1))}%`;
}

/** `2025-03-10`. */
export function formatDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

/** `2025-03-10 14:00 UTC`. */
export function formatUtc(d: Date): string {
  return `${d.toISOString().slice(0, 10)} ${d.toISOString().slice(11, 16)} UTC`;
}

/** `from 2025-03-10 14:00 to 15:00 UTC`, with the second date only when the day changes. */
export function formatRange(from: Date, to: Date): string {
  const sameDay = formatDay(from) === formatDay(to);
  const end = sameDay ? to.toISOString().slice(11, 16) : `${formatDay(to)} ${to.toISOString().slice(11, 16)}`;
  return `from ${formatDay(from)} ${from.toISOString().slice(11, 16)} to ${end} UTC`;
}

/** How a summary names a scope: `project prj_1`, `key key_1`, `the organization`. */
export function describeScope(scope: { kind: string; id: string }): string {
  if (scope.kind === 'organization') return 'the organization';
  if (scope.kind === 'mcp_server') return `MCP server ${scope.id}`;
  // An end customer's cap scope is `<cap rule>:<customer id>`; their spend series, the id alone.
  if (scope.kind === 'end_user') return `end customer ${endUserOf(scope.id)}`;
  return `${scope.kind} ${scope.id}`;
}

/** The customer's own id in an end-customer scope id (`<cap rule>:<customer>` or the id alone). */
export function endUserOf(scopeId: string): string {
  return scopeId.startsWith('eucap_') ? scopeId.slice(scopeId.indexOf(':') + 1) : scopeId;
}

export function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
