import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * A Prometheus server scraping the gateway's ops ports, for `npm start` and the metrics test:
 * Debian's `prometheus` (or PROMETHEUS_PATH), its config and data in a folder of its own.
 */
export type PrometheusServer = { url: string; stop(): Promise<void> };

/** The Prometheus binary, when this machine has one. */
export function prometheusBinary(): string | null {
  const binary = process.env.PROMETHEUS_PATH ?? 'prometheus';
  return spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0 ? binary : null;
}

export async function startPrometheus(options: {
  binary: string;
  dir: string;
  port: number;
  /** Scrape jobs: a name and the `host:port` serving `/metrics`. */
  jobs: Array<{ name: string; target: string }>;
  scrapeIntervalSeconds?: number;
}): Promise<PrometheusServer> {
  const every = `${options.scrapeIntervalSeconds ?? 5}s`;
  fs.mkdirSync(options.dir, { recursive: true });
  const config = path.join(options.dir, 'prometheus.yml');
  fs.writeFileSync(config, [
    `global: { scrape_interval: ${every}, evaluation_interval: ${every} }`,
    'scrape_configs:',
    ...options.jobs.flatMap((j) => [`  - job_name: ${j.name}`, `    static_configs: [{ targets: ['${j.target}'] }]`]),
    '',
  ].join('\n'));
  const child = spawn(options.binary, [`--config.file=${config}`, `--storage.tsdb.path=${path.join(options.dir, 'data')}`, `--web.listen-address=127.0.0.1:${options.port}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-2000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${options.port}`;
  const deadline = Date.now() + 30_000;
  while ((await fetch(`${url}/-/ready`).catch(() => null))?.ok !== true) {
    const last = output.trim().split('\n').pop() ?? '';
    if (child.exitCode !== null) throw new Error(`Prometheus exited: ${last}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`Prometheus did not come up within 30 s: ${last}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
