import type { RedisClient } from '../redis';
import { countInWindow, retryAfterSeconds } from '../ratelimit/fixed-window';

export type AuthFailureVerdict = { limited: boolean; retryAfterSeconds: number };

/**
 * Counts failed authentications per client address in Redis, so every API instance agrees on
 * when an address sending bad credentials in bulk is cut off. Only failures touch Redis.
 */
export function createAuthFailureLimiter(redis: RedisClient, limitPerMinute: number) {
  return {
    async recordFailure(scope: 'gateway' | 'manage', address: string): Promise<AuthFailureVerdict> {
      const window = await countInWindow(redis, `authfail:${scope}:${address}`, 60_000);
      return { limited: window.count > limitPerMinute, retryAfterSeconds: retryAfterSeconds(window) };
    },
  };
}

export type AuthFailureLimiter = ReturnType<typeof createAuthFailureLimiter>;
