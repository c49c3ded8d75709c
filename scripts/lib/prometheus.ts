import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startChildService } from './child-service';

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
  /** Scrape jobs: a name, the `host:port` serving `/metrics`, and the bearer token it asks for (GW_METRICS_TOKEN), if any. */
  jobs: Array<{ name: string; target: string; bearerToken?: string }>;
  scrapeIntervalSeconds?: number;
}): Promise<PrometheusServer> {
  const every = `${options.scrapeIntervalSeconds ?? 5}s`;
  fs.mkdirSync(options.dir, { recursive: true });
  const config = path.join(options.dir, 'prometheus.yml');
  // A token is read from a file of its own, readable by this user only, never written in the config.
  const tokenFile = (job: string, token: string) => {
    const file = path.join(options.dir, `${job}.token`);
    fs.writeFileSync(file, token, { mode: 0o600 });
    fs.chmodSync(file, 0o600);
    return file;
  };
  fs.writeFileSync(config, [
    `global: { scrape_interval: ${every}, evaluation_interval: ${every} }`,
    'scrape_configs:',
    ...options.jobs.flatMap((j) => [
      `  - job_name: ${j.name}`,
      ...(j.bearerToken ? [`    authorization: { type: Bearer, credentials_file: '${tokenFile(j.name, j.bearerToken)}' }`] : []),
      `    static_configs: [{ targets: ['${j.target}'] }]`,
    ]),
    '',
  ].join('\n'));
  const url = `http://127.0.0.1:${options.port}`;
  const service = await startChildService('Prometheus', options.binary, [`--config.file=${config}`, `--storage.tsdb.path=${path.join(options.dir, 'data')}`, `--web.listen-address=127.0.0.1:${options.port}`], async () => (await fetch(`${url}/-/ready`)).ok);
  return { url, stop: service.stop };
}
