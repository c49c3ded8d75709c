import fs from 'node:fs';
import Redis from 'ioredis';
import { Client } from 'pg';

type TeardownState = { adminUrl: string; database: string; redisUrl: string; scratch: string; stops: Array<() => Promise<void>> };

/** Drops the run's database and Redis keys, stops what setup started. */
export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as Record<string, unknown>).__gwTeardown as TeardownState | undefined;
  if (!state) return;
  const prefix = process.env.REDIS_KEY_PREFIX;
  if (prefix) {
    const redis = new Redis(state.redisUrl);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
    redis.disconnect();
  }
  const admin = new Client({ connectionString: state.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${state.database} WITH (FORCE)`);
  await admin.end();
  for (const stop of state.stops.reverse()) await stop().catch(() => undefined);
  fs.rmSync(state.scratch, { recursive: true, force: true });
}
