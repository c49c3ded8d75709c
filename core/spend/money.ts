/**
 * Money is counted in integer nano-dollars (DESIGN 6.5): a cheap request costs a few
 * micro-dollars, so anything coarser drifts over millions of requests. The wire keeps dollars
 * as numbers; these helpers are the only crossing. One nano-dollar number is exact up to about
 * $9 million (2^53 nanos); sums are taken as BigInt, so they stay exact at any size.
 */
export const NANOS_PER_DOLLAR = 1_000_000_000;

/** Dollars to whole nano-dollars, rounded half away from zero. */
export function toNanos(dollars: number): number {
  const nanos = Math.round(Math.abs(dollars) * NANOS_PER_DOLLAR);
  return dollars < 0 ? -nanos : nanos;
}

/** Nano-dollars (a number, a BigInt, or the decimal string Redis or Postgres answers) to dollars. */
export function toDollars(nanos: number | bigint | string | null | undefined): number {
  if (nanos === null || nanos === undefined || nanos === '') return 0;
  const whole = typeof nanos === 'bigint' ? nanos : BigInt(typeof nanos === 'number' ? Math.round(nanos) : nanos.split('.')[0]!);
  // One conversion, from the exact decimal text: the double nearest the amount, so it prints as
  // the amount (11.771765394, never the 11.771765393999999 that a sum of two doubles gave).
  const magnitude = (whole < 0n ? -whole : whole).toString().padStart(10, '0');
  return Number(`${whole < 0n ? '-' : ''}${magnitude.slice(0, -9)}.${magnitude.slice(-9)}`);
}

/** An exact sum of nano-dollar amounts. */
export function sumNanos(amounts: Iterable<number | bigint | string>): bigint {
  let total = 0n;
  for (const a of amounts) total += typeof a === 'bigint' ? a : BigInt(typeof a === 'number' ? Math.round(a) : a);
  return total;
}

/** Exact nano-dollars of decimal dollar text (`"12.5"`, Postgres's `-0.250000000`); digits past the ninth decimal are cut. */
export function decimalToNanos(text: string): bigint {
  const negative = text.startsWith('-');
  const [whole = '0', fraction = ''] = text.replace(/^-/, '').split('.');
  const nanos = BigInt(whole) * BigInt(NANOS_PER_DOLLAR) + BigInt((fraction + '000000000').slice(0, 9));
  return negative ? -nanos : nanos;
}

/** Dollars rounded to the nano-dollar, for answers that carry a cost. */
export function roundDollars(dollars: number): number {
  return toDollars(toNanos(dollars));
}
