import type Redis from 'ioredis';

const WINDOW_MS = 60_000;

/** INCR with the window's expiry set on the first failure; returns the count and the time left. */
const RECORD_FAILURE = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
`;

export type AuthFailureVerdict = { limited: boolean; retryAfterSeconds: number };

/**
 * Counts failed authentications per client address in Redis, so every API instance agrees on
 * when an address sending bad credentials in bulk is cut off. Only failures touch Redis.
 */
export function createAuthFailureLimiter(redis: Redis, limitPerMinute: number) {
  return {
    async recordFailure(scope: 'gateway' | 'manage', address: string): Promise<AuthFailureVerdict> {
      const [count, ttl] = (await redis.eval(RECORD_FAILURE, 1, `authfail:${scope}:${address}`, WINDOW_MS)) as [number, number];
      return { limited: count > limitPerMinute, retryAfterSeconds: Math.max(1, Math.ceil(ttl / 1000)) };
    },
  };
}

export type AuthFailureLimiter = ReturnType<typeof createAuthFailureLimiter>;
