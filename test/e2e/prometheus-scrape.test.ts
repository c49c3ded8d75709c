import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startOpsServer } from '../../core/observability/metrics';
import { freePort } from '../../scripts/lib/ports';
import { prometheusBinary, startPrometheus, type PrometheusServer } from '../../scripts/lib/prometheus';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { uniquePrefix } from '../helpers/harness';
import { until } from '../helpers/until';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/**
 * Prometheus itself (Debian's `prometheus`, which `npm test` installs once per machine) scrapes
 * the API's ops port while known traffic runs, and a worker process's two (its own metrics, and
 * the Temporal SDK's); its HTTP API then answers the exact increase (issue 36, "real parts in
 * the tests"). The API's and the worker's ops ports take a bearer token (GW_METRICS_TOKEN), which
 * Prometheus sends from its scrape config as `npm start` writes it; the worker's ports listen
 * where they do by default, on loopback (issue 52).
 */
const PROMETHEUS = prometheusBinary();
const METRICS_TOKEN = 'prometheus-scrape-token-0123456789';

describe('Prometheus scraping the API', () => {
  let f: ChatFixture;
  let ops: Awaited<ReturnType<typeof startOpsServer>>;
  let prometheus: PrometheusServer | undefined;
  let worker: WorkerProcess | undefined;
  /** The worker's two ports: its own metrics, and the Temporal SDK's. */
  let workerPorts: [number, number];
  let promUrl: string;
  let dir: string;

  /** One instant value of a PromQL expression (0 when it has no series yet). */
  const query = async (expr: string): Promise<number> => {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as { status: string; data: { result: Array<{ value: [number, string] }> } };
    expect(body.status).toBe('success');
    return body.data.result.reduce((n, r) => n + Number(r.value[1]), 0);
  };
  /** The number of scrapes of the API Prometheus has made so far. */
  const scrapes = () => query('count_over_time(up{job="gateway-api"}[10m])');

  beforeAll(async () => {
    if (!PROMETHEUS) throw new Error('No Prometheus: npm test installs Debian\'s prometheus once per machine (as root), or set PROMETHEUS_PATH.');
    f = await startChatFixture({ GW_OPS_PORT: '0' });
    ops = await startOpsServer(f.api.runtime.metrics!.registry, 0, '127.0.0.1', METRICS_TOKEN);
    await f.connect('openai');
    const [workerOps, workerTemporal] = (workerPorts = [await freePort(), await freePort()]);
    worker = await startWorkerProcess('webhooks', uniquePrefix('prom'), { GW_OPS_PORT: String(workerOps), GW_TEMPORAL_METRICS_PORT: String(workerTemporal), GW_METRICS_TOKEN: METRICS_TOKEN });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-prometheus-'));
    prometheus = await startPrometheus({
      binary: PROMETHEUS, dir, port: await freePort(), scrapeIntervalSeconds: 1,
      jobs: [
        { name: 'gateway-api', target: `127.0.0.1:${ops.port}`, bearerToken: METRICS_TOKEN },
        { name: 'gateway-worker', target: `127.0.0.1:${workerOps}`, bearerToken: METRICS_TOKEN },
        { name: 'gateway-worker-temporal', target: `127.0.0.1:${workerTemporal}` },
      ],
    });
    promUrl = prometheus.url;
    await until(async () => (await query('sum(up)')) === 3, 'the first scrape of the API and the worker\'s two ports', 30_000, 200);
  }, 60_000);
  afterAll(async () => {
    await prometheus?.stop();
    await worker?.stop();
    await ops?.close();
    await f?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('sees exactly the requests sent, by endpoint, status and provider', async () => {
    const served = 'sum(gw_requests_total{job="gateway-api",endpoint="chat.completions",status="200",provider="openai"})';
    const refusals = 'sum(gw_refusals_total{job="gateway-api",code="key_budget"})';
    // The same requests as the OpenTelemetry HTTP conventions name them.
    const http = 'sum(http_server_request_duration_seconds_count{job="gateway-api",http_request_method="POST",http_route="/v1/chat/completions",http_response_status_code="200"})';
    const secret = await f.key();
    // A first request makes the series exist, so the baseline below is a scraped value, not an absence.
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] })).status).toBe(200);
    await until(async () => (await query(served)) >= 1 && (await query(http)) >= 1, 'the first request scraped', 30_000, 200);
    // Two more scrapes after it, so nothing from before is still on its way.
    const seen = await scrapes();
    await until(async () => (await scrapes()) >= seen + 2, 'two more scrapes', 30_000, 200);
    const before = await query(served);
    const httpBefore = await query(http);

    for (let i = 0; i < 5; i++) expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] })).status).toBe(200);
    const broke = await f.key({ credit_limit: { amount: 0.01, period: 'monthly' } });
    expect((await f.chat(broke, { model: 'openai/gpt-4o', max_tokens: 16_000, messages: [{ role: 'user', content: 'Say hello' }] })).status).toBe(402);

    await until(async () => (await query(served)) === before + 5 && (await query(refusals)) === 1 && (await query(http)) === httpBefore + 5, 'Prometheus to have scraped the traffic', 30_000, 200);
    expect(await query(served)).toBe(before + 5);
    expect(await query(http)).toBe(httpBefore + 5);
    expect(await query('sum(gen_ai_client_token_usage_count{job="gateway-api",gen_ai_token_type="input"})')).toBeGreaterThanOrEqual(6);
    expect(await query('count(nodejs_eventloop_lag_seconds{job="gateway-api"})')).toBe(1);
  });

  it('scrapes a worker: its process metrics, and the Temporal SDK\'s worker metrics', async () => {
    expect(await query('count(nodejs_eventloop_lag_seconds{job="gateway-worker",service="gw-worker"})')).toBe(1);
    // (GC histograms appear with the process's first collection, which a fresh worker may not have had.)
    expect(await query('sum(nodejs_heap_size_used_bytes{job="gateway-worker"})')).toBeGreaterThan(0);
    // Its Postgres pool and Redis client, as the API's.
    expect(await query('count(gw_postgres_pool_clients{job="gateway-worker"})')).toBe(3);
    expect(await query('sum(gw_redis_connected{job="gateway-worker"})')).toBeGreaterThanOrEqual(1);
    // The SDK's own: task slots and pollers of the worker's queues (reported once its pollers start).
    await until(async () => (await query('count(temporal_worker_task_slots_available{job="gateway-worker-temporal"})')) > 0, 'the Temporal SDK\'s task slots', 30_000, 200);
    await until(async () => (await query('sum(temporal_num_pollers{job="gateway-worker-temporal"})')) > 0, 'the Temporal SDK\'s pollers', 30_000, 200);
  });

  it('has a Grafana dashboard whose every expression is valid PromQL naming only metrics the scrapes expose', async () => {
    const dashboard = JSON.parse(fs.readFileSync(path.join(__dirname, '../../docs/grafana/gateway.json'), 'utf8')) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    const exposed = new Set<string>();
    for (const port of [ops.port, ...workerPorts]) {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
      for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
        const suffixes = type === 'histogram' ? ['_bucket', '_sum', '_count'] : type === 'summary' ? ['', '_sum', '_count'] : type === 'counter' && !name!.endsWith('_total') ? ['', '_total'] : [''];
        for (const suffix of suffixes) exposed.add(`${name}${suffix}`);
      }
    }
    const named = new Set<string>();
    for (const panel of dashboard.panels) {
      for (const { expr } of panel.targets) {
        const res = (await (await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`)).json()) as { status: string; error?: string };
        expect([panel.title, res.status, res.error]).toEqual([panel.title, 'success', undefined]);
        for (const metric of metricNames(expr)) {
          named.add(metric);
          expect([panel.title, metric, exposed.has(metric)]).toEqual([panel.title, metric, true]);
        }
      }
    }
    // The dashboard covers the gateway's own metrics, the process's and the Temporal SDK's.
    for (const metric of ['gw_requests_total', 'gw_refusals_total', 'gen_ai_client_token_usage_sum', 'http_server_request_duration_seconds_bucket', 'nodejs_eventloop_lag_p99_seconds', 'temporal_worker_task_slots_used']) expect(named).toContain(metric);
  });
});

/** PromQL's own words: functions, aggregations and their modifiers. */
const PROMQL_WORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool']);

/** The metric names an expression reads: identifiers outside label matchers, groupings and strings that are not calls. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"[^"]*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/(?<![\w:])\d[\d.]*(e[-+]?\d+)?/gi, '');
  const names: string[] = [];
  for (const m of bare.matchAll(/[a-zA-Z_:][\w:]*(?=\s*(\(?))/g)) {
    if (m[1] === '(' || PROMQL_WORDS.has(m[0])) continue;
    names.push(m[0]);
  }
  return names;
}
