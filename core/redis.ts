import Redis from 'ioredis';

export type RedisHandle = {
  /** Every key this client touches is prefixed, so deployments and test runs share a server safely. */
  redis: Redis;
  prefix: string;
  /** Pub/sub channels are not covered by ioredis' keyPrefix; name them through this. */
  channel(name: string): string;
  close(): Promise<void>;
};

export function connectRedis(url: string, prefix: string): RedisHandle {
  const redis = new Redis(url, { keyPrefix: prefix, maxRetriesPerRequest: 2, lazyConnect: false });
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
