import Redis, { Cluster } from 'ioredis';

/**
 * One Redis, or a Redis Cluster (ioredis's cluster client, with the same commands). Every script
 * the gateway runs keeps its keys in one slot: the organization is a hash tag in each of them.
 */
export type RedisClient = Redis | Cluster;

export type RedisHandle = {
  /** Every key this client touches is prefixed, so deployments and test runs share a server safely. */
  redis: RedisClient;
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
  const seeds = clusterSeeds(url);
  const redis = seeds ? connectCluster(seeds, prefix) : new Redis(url, {
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

/** Commands sent and not yet answered: a cluster's, over its nodes. */
export function pendingCommands(redis: RedisClient): number {
  if (!(redis instanceof Cluster)) return redis.commandQueue.length;
  return redis.nodes().reduce((sum, node) => sum + node.commandQueue.length, 0);
}

/**
 * A URL that names several nodes, comma-separated (`redis://10.0.0.1:6379,redis://10.0.0.2:6379`),
 * is a Redis Cluster's seed nodes: the client learns the rest of the cluster from them.
 */
export function clusterSeeds(url: string): Array<{ host: string; port: number }> | null {
  const parts = url.split(',').map((part) => part.trim()).filter(Boolean);
  if (parts.length < 2) return null;
  return parts.map((part) => {
    const parsed = new URL(part.includes('://') ? part : `redis://${part}`);
    return { host: parsed.hostname, port: Number(parsed.port || 6379) };
  });
}

function connectCluster(seeds: Array<{ host: string; port: number }>, prefix: string): Cluster {
  return new Cluster(seeds, {
    keyPrefix: prefix,
    enableAutoPipelining: true,
    clusterRetryStrategy: (times) => Math.min(times * 200, 2_000),
    redisOptions: { maxRetriesPerRequest: REDIS_RETRIES_PER_REQUEST, connectTimeout: REDIS_CONNECT_TIMEOUT_MS },
  });
}
