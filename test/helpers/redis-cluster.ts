import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { redisAnswers } from '../../scripts/lib/local-services';
import { freePort, isPortFree, waitFor } from '../../scripts/lib/ports';

export type RedisCluster = { url: string; ports: number[]; stop(): Promise<void> };

/** A port whose cluster bus port (10 000 above it) is free too. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port + 10_000 < 65_536 && !taken.has(port) && (await isPortFree(port + 10_000))) return port;
  }
}

/**
 * A real three-master Redis Cluster on local ports, started from the machine's `redis-server`
 * (`--cluster-enabled yes`) and joined with `redis-cli --cluster create` (issue 37). Its URL is
 * the three seed nodes, comma-separated, as the gateway's REDIS_URL names a cluster.
 */
export async function startRedisCluster(): Promise<RedisCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-redis-cluster-'));
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await clusterPort(taken);
    taken.add(port);
    ports.push(port);
  }
  const children: ChildProcess[] = ports.map((port) => spawn('redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
    '--save', '', '--appendonly', 'no', '--dir', dir,
  ], { stdio: 'ignore' }));
  const stop = async () => {
    await Promise.all(children.map((child) => new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    })));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) await waitFor(`redis-server on ${port}`, () => redisAnswers(`redis://127.0.0.1:${port}`), 15_000);
    const created = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8' });
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
    const clusterOk = async () => ports.every((p) => spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout.includes('cluster_state:ok'));
    await waitFor('the Redis Cluster (cluster_state:ok)', clusterOk, 15_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: ports.map((p) => `redis://127.0.0.1:${p}`).join(','), ports, stop };
}
