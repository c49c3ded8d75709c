import type { RedisClient } from '../redis';
import type { KeyContext } from '../auth/gateway-key-auth';
import { countInWindow, type WindowCount } from './fixed-window';

/** The per-key tier is counted in one-minute windows (spec 8). */
export const KEY_RATE_WINDOW_MS = 60_000;

/**
 * The Redis key of a key's rate window. Per lineage, so a rotated key and its successor share
 * one window (rotation neither resets nor doubles it); the organization is a hash tag, so a
 * script that also touches the organization's spend keys stays in one Redis Cluster slot.
 */
export function keyRateWindowKey(key: Pick<KeyContext, 'orgId' | 'lineageId'>): string {
  return `key-rpm:{${key.orgId}}:${key.lineageId}`;
}

/** Counts one request of the key's lineage in the shared window (one round trip). */
export function countKeyRequest(redis: RedisClient, key: Pick<KeyContext, 'orgId' | 'lineageId'>): Promise<WindowCount> {
  return countInWindow(redis, keyRateWindowKey(key), KEY_RATE_WINDOW_MS);
}

/** The `X-RateLimit-*` values of spec 8 for a counted request. */
export function rateLimitHeaders(key: Pick<KeyContext, 'rateLimitRpm'>, window: WindowCount, nowMs: number): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(key.rateLimitRpm),
    'X-RateLimit-Remaining': String(Math.max(0, key.rateLimitRpm - window.count)),
    'X-RateLimit-Reset': String(Math.ceil((nowMs + window.resetInMs) / 1000)),
  };
}
