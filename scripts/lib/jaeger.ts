import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startChildService } from './child-service';

/**
 * A Jaeger (v2, the all-in-one `jaeger` binary: OTLP receiver, in-memory store, query API and UI)
 * for `npm start` and the tracing test. `scripts/setup-jaeger` builds it once per machine from
 * its Go module; JAEGER_PATH names another.
 */
export type JaegerServer = {
  /** The UI and the query API (`/api/traces/{id}`). */
  url: string;
  /** Where OTLP over HTTP is received: what OTEL_EXPORTER_OTLP_ENDPOINT names. */
  otlpHttpUrl: string;
  stop(): Promise<void>;
};

/** The Jaeger binary, when this machine has one (JAEGER_PATH, else the one setup-jaeger builds). */
export function jaegerBinary(): string | null {
  const candidates = process.env.JAEGER_PATH ? [process.env.JAEGER_PATH] : goBinaries('jaeger');
  return candidates.find((c) => fs.existsSync(c)) ?? null;
}

/** Where `go install` puts binaries: GOBIN, else GOPATH/bin (~/go/bin by default). */
function goBinaries(name: string): string[] {
  const out = spawnSync('go', ['env', 'GOBIN', 'GOPATH'], { encoding: 'utf8' });
  const [gobin, gopath] = out.status === 0 ? out.stdout.split('\n').map((s) => s.trim()) : [];
  const home = process.env.HOME ?? '/root';
  return [gobin && path.join(gobin, name), gopath && path.join(gopath, 'bin', name), path.join(home, 'go', 'bin', name)].filter((p): p is string => Boolean(p));
}

export async function startJaeger(options: { binary: string; dir: string; ports: { ui: number; otlpHttp: number; otlpGrpc: number; queryGrpc: number; health: number } }): Promise<JaegerServer> {
  const { ports } = options;
  fs.mkdirSync(options.dir, { recursive: true });
  const config = path.join(options.dir, 'jaeger.yaml');
  // The all-in-one configuration, in memory, OTLP in only, every port on loopback and chosen here.
  fs.writeFileSync(config, `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:${ports.ui}
    grpc:
      endpoint: 127.0.0.1:${ports.queryGrpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:${ports.health}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${ports.otlpGrpc}
      http:
        endpoint: 127.0.0.1:${ports.otlpHttp}
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`);
  const url = `http://127.0.0.1:${ports.ui}`;
  // Up when the query API answers and the OTLP receiver takes connections.
  const up = async () => (await fetch(`${url}/api/services`)).ok && (await fetch(`http://127.0.0.1:${ports.otlpHttp}/v1/traces`, { method: 'POST' }).then(() => true));
  const service = await startChildService('Jaeger', options.binary, [`--config=file:${config}`], up);
  return { url, otlpHttpUrl: `http://127.0.0.1:${ports.otlpHttp}`, stop: service.stop };
}
