/** Injectable time source: domain code asks a Clock, tests pass a fixed one. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export function fixedClock(at: Date): Clock & { set(d: Date): void } {
  let current = at;
  return { now: () => current, set: (d) => (current = d) };
}

export function unixSeconds(d: Date): number {
  return Math.floor(d.getTime() / 1000);
}

/** Unix seconds, or null for a time not set (the wire form of optional timestamps). */
export function unixOrNull(d: Date | null | undefined): number | null {
  return d ? unixSeconds(d) : null;
}
