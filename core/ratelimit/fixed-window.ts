import type { RedisClient } from '../redis';
import { redisScript } from '../redis-script';

/**
 * INCR with the window's expiry set when the counter has none (a new window; a count that
 * leased slots given back brought to 0 keeps its window); returns the count and the time left.
 */
const COUNT_IN_WINDOW = redisScript(`
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`);

export type WindowCount = { count: number; resetInMs: number };

/** One Redis round trip: count a hit in a fixed window shared by every instance. */
export async function countInWindow(redis: RedisClient, key: string, windowMs: number): Promise<WindowCount> {
  const [count, ttl] = (await COUNT_IN_WINDOW(redis, [key], [windowMs])) as [number, number];
  return { count, resetInMs: ttl > 0 ? ttl : windowMs };
}

export function retryAfterSeconds(w: WindowCount): number {
  return Math.max(1, Math.ceil(w.resetInMs / 1000));
}
