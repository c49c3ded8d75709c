/**
 * Postgres, Redis and Temporal for a bench: GW_DATA_DIR/runtime.json (what `npm start` runs),
 * else DATABASE_URL / REDIS_URL / TEMPORAL_ADDRESS, else the bench's own (an embedded
 * PostgreSQL, a redis-server without persistence, an in-memory Temporal dev server), stopped at
 * the end.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import Redis from 'ioredis';
import { Client as PgClient } from 'pg';
import { loadConfig } from '../../core/config';
import { startEmbeddedPostgres } from '../../scripts/lib/local-services';
import { freePort } from '../../scripts/lib/ports';
import { readRuntimeFile } from '../../scripts/lib/runtime-file';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';
import { startTemporalDevServer } from '../../scripts/lib/temporal-dev-server';
import { cleanups, log, stopChild, waitForPort } from './processes';
import { cpuSeconds, pidListeningOn } from './proc';

export type Services = {
  databaseUrl: string; redisUrl: string; temporalAddress: string; postgresPid: number | null; redisPid: number | null; source: string;
  /** Whether the Temporal dev server is the bench's own (in memory, gone at the end). */
  ownTemporal: boolean;
  /** Counters read around a load run: Redis commands served, Postgres transactions and rows inserted. */
  counters?: () => Promise<Counters>;
};

export type Counters = { redisCommands: number; redisByCommand: Map<string, number>; pgTransactions: number; pgInserted: number };

export async function serviceCounters(svc: Services): Promise<Services['counters']> {
  const redis = new Redis(svc.redisUrl, { lazyConnect: true });
  await redis.connect();
  const pg = new PgClient({ connectionString: svc.databaseUrl });
  await pg.connect();
  cleanups.push(() => void redis.disconnect(), () => pg.end());
  return async () => {
    const info = await redis.info('commandstats');
    const redisByCommand = new Map([...info.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
    const redisCommands = [...redisByCommand.values()].reduce((a, n) => a + n, 0);
    // Statistics reach pg_stat_database within about a second; the runs last several.
    const { rows } = await pg.query<{ x: string; i: string }>('SELECT sum(xact_commit + xact_rollback) AS x, sum(tup_inserted) AS i FROM pg_stat_database');
    return { redisCommands, redisByCommand, pgTransactions: Number(rows[0]!.x), pgInserted: Number(rows[0]!.i) };
  };
}

/** CPU seconds of Postgres (postmaster, backends, reaped children) and Redis together. */
export function servicesCpu(svc: Services): number {
  return (svc.postgresPid ? cpuSeconds(svc.postgresPid, true) : 0) + (svc.redisPid ? cpuSeconds(svc.redisPid) : 0);
}

export async function services(work: string): Promise<Services> {
  const base = loadConfig();
  const runtime = readRuntimeFile(base.dataDir);
  let databaseUrl = base.DATABASE_URL ?? runtime?.DATABASE_URL;
  let redisUrl = base.REDIS_URL ?? runtime?.REDIS_URL;
  let temporalAddress = base.TEMPORAL_ADDRESS ?? runtime?.TEMPORAL_ADDRESS;
  let ownTemporal = false;
  const source: string[] = [];
  if (runtime) source.push(`addresses from ${path.join(base.dataDir, 'runtime.json')} (npm start)`);

  if (!databaseUrl) {
    log('starting an embedded PostgreSQL for the bench...');
    const pg = await startEmbeddedPostgres(path.join(work, 'postgres'), await freePort());
    cleanups.push(() => pg.stop());
    databaseUrl = pg.url;
    source.push('embedded PostgreSQL started by the bench');
  }
  if (!redisUrl) {
    const port = await freePort();
    if (spawnSync('redis-server', ['--version']).error) throw new Error('redis-server is needed (apt-get install redis-server) or set REDIS_URL');
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    cleanups.push(() => stopChild(child));
    redisUrl = `redis://127.0.0.1:${port}`;
    await waitForPort('redis-server', port, child, '/dev/null');
    source.push('redis-server started by the bench (no persistence)');
  }
  if (!temporalAddress) {
    log('starting a Temporal dev server for the bench...');
    const server = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort() });
    cleanups.push(() => server.stop());
    temporalAddress = server.address;
    ownTemporal = true;
    source.push('Temporal dev server started by the bench (in memory)');
  }
  const portOf = (url: string) => Number(new URL(url).port || 0);
  return {
    databaseUrl,
    redisUrl,
    temporalAddress,
    postgresPid: pidListeningOn(portOf(databaseUrl) || 5432),
    redisPid: pidListeningOn(portOf(redisUrl) || 6379),
    source: source.join('; ') || 'DATABASE_URL, REDIS_URL, TEMPORAL_ADDRESS from the environment',
    ownTemporal,
  };
}
