import type { RedisHandle } from '../redis';

/**
 * Any management write publishes here; every API instance drops its cached key and routing
 * config on receipt. Messages name what changed for logs, but receivers clear everything:
 * changes are rare and a full clear can never miss a dependency.
 */
const CHANNEL = 'config-changed';

export async function publishConfigChange(handle: RedisHandle, what: string): Promise<void> {
  await handle.redis.publish(handle.channel(CHANNEL), what);
}

/** Subscribes on a connection of its own (a subscribed Redis connection can do nothing else). */
export async function subscribeConfigChanges(handle: RedisHandle, onChange: (what: string) => void): Promise<() => Promise<void>> {
  const subscriber = handle.redis.duplicate();
  subscriber.on('error', () => undefined);
  const channel = handle.channel(CHANNEL);
  subscriber.on('message', (ch: string, message: string) => {
    if (ch === channel) onChange(message);
  });
  await subscriber.subscribe(channel);
  return async () => {
    await subscriber.quit().catch(() => subscriber.disconnect());
  };
}
