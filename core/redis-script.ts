import { createHash } from 'node:crypto';
import type { RedisClient } from './redis';

export type RedisScript = (redis: RedisClient, keys: readonly string[], args: ReadonlyArray<string | number>) => Promise<unknown>;

/**
 * A Lua script run by its SHA (`EVALSHA`), so the hot path sends a 40-character digest instead
 * of the script's text; the first call on a server that does not know it yet (a fresh or
 * restarted Redis answers NOSCRIPT) sends the text once with `EVAL`, which also loads it.
 */
export function redisScript(lua: string): RedisScript {
  const sha = createHash('sha1').update(lua).digest('hex');
  return async (redis, keys, args) => {
    try {
      return await redis.evalsha(sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(lua, keys.length, ...keys, ...args);
    }
  };
}
