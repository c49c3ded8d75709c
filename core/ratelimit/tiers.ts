/**
 * The rate tiers a gateway key may have, in requests a minute (spec 8), and the default. A
 * module of its own with no imports, so the console's bundle can show the same list.
 */
export const RATE_LIMIT_TIERS = [60, 100, 200, 300, 500, 1000, 2000, 5000, 10000, 20000, 50000] as const;
export const DEFAULT_RATE_LIMIT_RPM = 200;
