import { Cluster } from 'ioredis';
import type { RedisHandle } from '../redis';

/**
 * Any management write publishes here; every API instance drops the cached key and routing
 * config of that organization on receipt (one organization's edit must not send every other
 * organization's traffic back to Postgres). A message without an organization clears all.
 */
const CHANNEL = 'config-changed';

export type ConfigChange = { orgId: string | null; what: string };

export async function publishConfigChange(handle: RedisHandle, change: { orgId: string; what: string } | string): Promise<void> {
  const message = typeof change === 'string' ? change : `${change.orgId}\t${change.what}`;
  await handle.redis.publish(handle.channel(CHANNEL), message);
}

function parseChange(message: string): ConfigChange {
  const tab = message.indexOf('\t');
  return tab < 0 ? { orgId: null, what: message } : { orgId: message.slice(0, tab), what: message.slice(tab + 1) };
}

/** Subscribes on a connection of its own (a subscribed Redis connection can do nothing else). */
export async function subscribeConfigChanges(handle: RedisHandle, onChange: (change: ConfigChange) => void): Promise<() => Promise<void>> {
  // A cluster's subscriber is a cluster client too: a publish reaches every node's subscribers.
  const subscriber = handle.redis instanceof Cluster ? handle.redis.duplicate() : handle.redis.duplicate();
  subscriber.on('error', () => undefined);
  const channel = handle.channel(CHANNEL);
  subscriber.on('message', (ch: string, message: string) => {
    if (ch === channel) onChange(parseChange(message));
  });
  await subscriber.subscribe(channel);
  return async () => {
    await subscriber.quit().catch(() => subscriber.disconnect());
  };
}
