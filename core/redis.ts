import Redis from 'ioredis';

export type RedisHandle = {
  /** Every key this client touches is prefixed, so deployments and test runs share a server safely. */
  redis: Redis;
  prefix: string;
  /** Pub/sub channels are not covered by ioredis' keyPrefix; name them through this. */
  channel(name: string): string;
  close(): Promise<void>;
};

/** One connection attempt waits at most this long. */
export const REDIS_CONNECT_TIMEOUT_MS = 2_000;
/** Reconnect attempts a waiting command rides through before it fails (about 1.2 s when refused). */
export const REDIS_RETRIES_PER_REQUEST = 3;

/**
 * While Redis is down, a command waits in the client's queue through a few reconnect attempts
 * (200, 400, 600 ms apart), then fails with MaxRetriesPerRequestError, which the API answers
 * as 503 with Retry-After. Reconnecting goes on, at most 2 s apart, until Redis is back.
 */
export function connectRedis(url: string, prefix: string): RedisHandle {
  const redis = new Redis(url, {
    keyPrefix: prefix,
    maxRetriesPerRequest: REDIS_RETRIES_PER_REQUEST,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    retryStrategy: (times) => Math.min(times * 200, 2_000),
    lazyConnect: false,
    // Commands issued in the same tick (many requests' reservations under load) go out as one
    // socket write: a write per command was a tenth of the API's CPU in the bench's profile.
    enableAutoPipelining: true,
  });
  // Connection errors surface on the commands that need Redis; the client reconnects by itself.
  redis.on('error', () => undefined);
  return {
    redis,
    prefix,
    channel: (name) => `${prefix}${name}`,
    close: async () => {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
