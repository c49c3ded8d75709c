import type { RedisClient } from '../redis';
import { ConfigError, type Config } from '../config';
import { connectRedis, type RedisHandle } from '../redis';

/**
 * The Redis of spend counters and key rate windows. A Redis that evicts keys under memory
 * pressure could drop a window's held total or a running job's hold, and the limit would no
 * longer be a ceiling; the windows are repaired from Postgres when one goes missing
 * (core/spend/holds.ts), but only a Redis that never evicts keeps every hold. So the spend keys
 * live either on the one Redis when it does not evict, or on their own (`SPEND_REDIS_URL`).
 */
export function connectSpendRedis(config: Config, main: RedisHandle): RedisHandle {
  return config.SPEND_REDIS_URL ? connectRedis(config.SPEND_REDIS_URL, config.REDIS_KEY_PREFIX) : main;
}

/** The policies under which Redis never evicts a key to make room. */
const NEVER_EVICTS = new Set(['noeviction']);

/**
 * Refuses to start on a spend Redis that may evict keys, in one line naming the policy and the
 * two ways out. A Redis whose CONFIG command is disabled (some managed services) cannot say; it
 * is taken as it is, with a warning.
 */
export async function checkSpendRedis(redis: RedisClient, config: Pick<Config, 'SPEND_REDIS_URL'>, warn: (message: string) => void = () => undefined): Promise<void> {
  let policy: string | undefined;
  try {
    const answer = (await redis.config('GET', 'maxmemory-policy')) as string[];
    policy = answer[1];
  } catch {
    warn('cannot read the spend Redis\'s maxmemory-policy (CONFIG is disabled); make sure it is noeviction, or spend limits may be exceeded when it evicts');
    return;
  }
  if (policy && !NEVER_EVICTS.has(policy)) {
    const which = config.SPEND_REDIS_URL ? 'SPEND_REDIS_URL' : 'REDIS_URL';
    throw new ConfigError(`the Redis at ${which} evicts keys (maxmemory-policy ${policy}), which would lift spend limits: set it to noeviction, or keep spend counters on a Redis of their own with SPEND_REDIS_URL`);
  }
}

