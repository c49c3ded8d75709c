import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TemporalCluster } from '../../scripts/lib/temporal-cluster';

/**
 * The cluster lives in Jest's main process (global setup), the tests in its workers: a tests
 * kills or restarts one of its processes through this loopback endpoint
 * (`POST /kill/history-1`, `POST /restart/history-1`).
 */
export async function startClusterControl(cluster: TemporalCluster): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const match = /^\/(kill|restart)\/([a-z0-9-]+)$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !match) return void res.writeHead(404).end();
    const [, action, name] = match as unknown as [string, 'kill' | 'restart', string];
    cluster[action](name).then(
      () => res.writeHead(204).end(),
      (err: unknown) => res.writeHead(500).end((err as Error).message),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** From a test: kill or restart one process of the run's cluster (`npm run test:cluster` only). */
export async function clusterProcess(action: 'kill' | 'restart', name: string): Promise<void> {
  const control = process.env.GW_TEST_CLUSTER_CONTROL;
  if (!control) throw new Error('no Temporal cluster in this run: `npm run test:cluster` starts one');
  const res = await fetch(`${control}/${action}/${name}`, { method: 'POST' });
  if (res.status !== 204) throw new Error(`${action} ${name}: ${res.status} ${await res.text()}`);
}
