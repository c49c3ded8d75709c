import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import ipaddr from 'ipaddr.js';
import { pendingCommands, type RedisClient } from '../redis';
import type { Pool } from 'pg';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ModelLabels, type CatalogNames } from './model-labels';
import { SeriesCounter, SeriesHistogram } from './series';
import type { RequestAttempt } from '../db/schema';
import type { BatchWriter } from '../db/batch-writer';
import type { RequestLogEntry, RequestLogWriter } from '../request-log/writer';

/**
 * Prometheus metrics of a gateway process (issue 36), with prom-client. Every model request
 * writes one request-log row, refused or served; the request metrics are read from that row as
 * it is recorded (`observeRequest`), so one place says what a request was, for the log, the
 * usage rollups and the metrics alike. Labels are bounded sets: endpoints, statuses, provider
 * kinds, models served that a catalog or a model map knows (model-labels.ts), failure kinds,
 * error codes; never an organization, key or user (the usage API answers per organization),
 * and no metric holds more than SERIES_PER_METRIC_MAX series (series.ts). Served on an ops port (`startOpsServer`), never on the
 * public one. Names follow Prometheus conventions (units as suffixes, `_total` on counters) and,
 * for model calls, the OpenTelemetry GenAI semantic conventions' metric names and attributes.
 */

/** Seconds buckets from a millisecond to ten minutes: gateway overhead to long generations. */
const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/**
 * Request rows observed together: one row's observation, made between two requests' other work,
 * finds the series' code and data out of the processor's caches (as the request spans' encoding
 * does, bench/results/2026-11-27-issue-36-traces.md).
 */
const ROWS_OBSERVED_TOGETHER = 32;
/** Token buckets as the GenAI conventions advise (powers of four). */
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304];
/**
 * `http.server.request.duration`'s buckets as the OpenTelemetry HTTP conventions advise them (5 ms
 * to 10 s), then the gateway's long tail: a model's answer, streamed or whole, runs to minutes,
 * and every request past 10 s would otherwise fall in `+Inf` alike. The advised bounds are all
 * there, so a query or alert on any of their `le` values reads what it reads elsewhere.
 */
export const HTTP_SERVER_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120, 300, 600];
/** The methods the HTTP conventions name; any other is `_OTHER`, so a client cannot make series by inventing methods. */
const HTTP_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);

/** The GenAI operation of a request-log endpoint. */
const OPERATIONS: Record<string, string> = {
  'chat.completions': 'chat', messages: 'chat', responses: 'chat', embeddings: 'embeddings',
  'images.generations': 'generate_content', 'images.edits': 'generate_content', 'audio.transcriptions': 'generate_content', 'audio.speech': 'generate_content',
};

export type GatewayMetrics = {
  registry: Registry;
  /** One request as its request-log row says it. */
  observeRequest(row: RequestLogEntry): void;
  /** A batch writer's queue, batch times and rows given up (past its queue's bound, or refused by Postgres), by its name. */
  watchWriter(name: string, writer: Pick<BatchWriter<unknown>, 'dropped' | 'queued' | 'onFlush'>): void;
  /** Names that connections' model maps hold, labelled by name (as each organization's configuration loads). */
  learnModelMaps: ModelLabels['learnModelMaps'];
  /**
   * One HTTP request of the API as it ended (`http_server_request_duration_seconds`): its method,
   * the matched route's template ('' when no route matched; never the path), the status sent (0
   * when the connection closed before one was) and its duration.
   */
  observeHttpRequest(method: string, route: string, status: number, seconds: number): void;
};

/**
 * A request-log writer that shows every row it takes to its observers first (the metrics, the
 * request's trace), in the request's own async context. Without observers, the writer itself.
 */
export function observedRequestLog(writer: RequestLogWriter, observers: ReadonlyArray<(row: RequestLogEntry) => void>): RequestLogWriter {
  if (observers.length === 0) return writer;
  return Object.assign({}, writer, {
    record(row: RequestLogEntry) {
      for (const observe of observers) observe(row);
      writer.record(row);
    },
  });
}


/**
 * Postgres pool and Redis client use, read at each scrape: the pool's clients in use, idle and
 * waiting for one (a full pool), and each Redis client's commands sent and not yet answered and
 * whether it is connected. For the API and every worker.
 */
export function watchConnections(registry: Registry, postgres: Pick<Pool, 'totalCount' | 'idleCount' | 'waitingCount'>, redis: Record<string, RedisClient>): void {
  new Gauge({
    name: 'gw_postgres_pool_clients', help: 'Postgres pool clients: in use, idle, and requests waiting for one.', labelNames: ['state'], registers: [registry],
    collect() {
      this.set({ state: 'in_use' }, postgres.totalCount - postgres.idleCount);
      this.set({ state: 'idle' }, postgres.idleCount);
      this.set({ state: 'waiting' }, postgres.waitingCount);
    },
  });
  new Gauge({
    name: 'gw_redis_pending_commands', help: 'Commands sent to Redis and not yet answered, by client (cache, spend).', labelNames: ['client'], registers: [registry],
    collect() {
      for (const [client, r] of Object.entries(redis)) this.set({ client }, pendingCommands(r));
    },
  });
  new Gauge({
    name: 'gw_redis_connected', help: '1 while a Redis client is connected and ready, else 0, by client.', labelNames: ['client'], registers: [registry],
    collect() {
      for (const [client, r] of Object.entries(redis)) this.set({ client }, r.status === 'ready' ? 1 : 0);
    },
  });
}

/** The Redis clients of a process by the name they are watched under: one, or the cache's and the spend's. */
export function redisClients(redis: { redis: RedisClient }, spendRedis: { redis: RedisClient }): Record<string, RedisClient> {
  return spendRedis === redis ? { main: redis.redis } : { cache: redis.redis, spend: spendRedis.redis };
}

/** A registry with the process's own metrics (event-loop lag, GC, heap, CPU, handles), every series labelled with its service. */
export function createProcessMetrics(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** `names`: the catalog's name for a model of a provider kind (model-labels.ts `catalogNames`); others are labelled `other` unless the organization maps them. */
export function createGatewayMetrics(service: string, names: CatalogNames): GatewayMetrics {
  const registry = createProcessMetrics(service);
  const models = new ModelLabels(names);
  // Rows are observed a batch at a time (ROWS_OBSERVED_TOGETHER), and every row held back is
  // observed before a scrape reads a series: a scrape sees every row recorded before it.
  const held: RequestLogEntry[] = [];
  const drain = () => {
    try {
      for (let i = 0; i < held.length; i++) observe(held[i]!);
    } finally {
      // A row that cannot be observed is not held, and tried, again with every row after it.
      held.length = 0;
    }
  };

  const requests = new SeriesCounter(registry, 'gw_requests_total', 'Model requests answered, by endpoint (the client protocol), HTTP status and the provider kind that served (none when none did).', ['endpoint', 'status', 'provider'], drain);
  const duration = new SeriesHistogram(registry, 'gw_request_duration_seconds', 'Time from a model request\'s arrival to its answer, by endpoint.', SECONDS_BUCKETS, ['endpoint'], drain);
  const added = new SeriesHistogram(registry, 'gw_request_added_duration_seconds', 'Time a model request spent in the gateway rather than waiting on providers, by endpoint.', SECONDS_BUCKETS, ['endpoint'], drain);
  const attempts = new SeriesCounter(registry, 'gw_provider_attempts_total', 'Calls to providers, by provider kind and outcome (ok, or the failure kind that drove failover).', ['provider', 'outcome'], drain);
  const cache = new SeriesCounter(registry, 'gw_response_cache_lookups_total', 'Response cache outcomes of requests that reached the cache step (hit, miss, bypass, uncacheable).', ['status'], drain);
  const guardrails = new SeriesCounter(registry, 'gw_guardrail_actions_total', 'Requests a guardrail policy acted on, by the strongest action taken.', ['action'], drain);
  const refusals = new SeriesCounter(registry, 'gw_refusals_total', 'Requests answered with an error carrying a code (budget, rate, unpriced, guardrail...), by HTTP status and code.', ['status', 'code'], drain);
  const spend = new SeriesCounter(registry, 'gw_spend_settled_usd_total', 'US dollars settled against budgets, by provider kind (estimated as answers report them).', ['provider'], drain);
  const tokens = new SeriesHistogram(registry, 'gen_ai_client_token_usage', 'Tokens per model call (GenAI semantic conventions), by operation, provider, model served ("other" when no catalog or model map knows it) and token type.', TOKEN_BUCKETS, ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_response_model', 'gen_ai_token_type'], drain, { open: ['gen_ai_response_model'] });
  const writers = new Map<string, Pick<BatchWriter<unknown>, 'dropped' | 'queued' | 'onFlush'>>();
  const reported = new Map<string, number>();
  new Counter({
    name: 'gw_batch_rows_dropped_total', help: 'Rows a batch writer gave up (request log, spend ledger): past its queue\'s bound, or in a batch Postgres refused.', labelNames: ['writer'], registers: [registry],
    collect() {
      for (const [name, writer] of writers) {
        const now = writer.dropped();
        const before = reported.get(name) ?? 0;
        if (now > before) this.inc({ writer: name }, now - before);
        else if (!reported.has(name)) this.inc({ writer: name }, 0);
        reported.set(name, now);
      }
    },
  });
  new Gauge({
    name: 'gw_batch_queued_rows', help: 'Rows a batch writer holds for its next batch (request log, spend ledger).', labelNames: ['writer'], registers: [registry],
    collect() {
      for (const [name, writer] of writers) this.set({ writer: name }, writer.queued());
    },
  });
  const flushes = new Histogram({ name: 'gw_batch_flush_duration_seconds', help: 'Time a batch writer\'s batch took to write (its insert and what rides with it), by writer.', labelNames: ['writer'], buckets: SECONDS_BUCKETS, registers: [registry] });
  // The OpenTelemetry HTTP server conventions' duration, as Prometheus names it and its labels
  // (dashboards and alerts made for any service so instrumented read it); every request, the
  // management API's and the probes' too. Route templates are the app's own, a bounded set; past
  // the series cap a route folds to `other`, its method and status kept.
  const httpServer = new SeriesHistogram(registry, 'http_server_request_duration_seconds', 'Duration of HTTP server requests (OpenTelemetry HTTP semantic conventions), by method, route template and status code.', HTTP_SERVER_DURATION_BUCKETS, ['http_request_method', 'http_route', 'http_response_status_code'], undefined, { open: ['http_route'] });
  const operation = new SeriesHistogram(registry, 'gen_ai_client_operation_duration_seconds', 'Duration of served model calls (GenAI semantic conventions), by operation, provider and model served ("other" when no catalog or model map knows it).', SECONDS_BUCKETS, ['gen_ai_operation_name', 'gen_ai_provider_name', 'gen_ai_response_model'], drain, { open: ['gen_ai_response_model'] });

  return {
    registry,
    learnModelMaps: (orgId, connections) => models.learnModelMaps(orgId, connections),
    watchWriter(name, writer) {
      writers.set(name, writer);
      writer.onFlush((seconds) => flushes.observe({ writer: name }, seconds));
    },
    observeRequest(row) {
      held.push(row);
      if (held.length >= ROWS_OBSERVED_TOGETHER) drain();
    },
    observeHttpRequest(method, route, status, seconds) {
      httpServer.observe(seconds, HTTP_METHODS.has(method) ? method : '_OTHER', route, status === 0 ? '' : String(status));
    },
  };

  function observe(row: RequestLogEntry): void {
    const endpoint = row.endpoint ?? 'unknown';
    const provider = row.provider ?? 'none';
    const status = String(row.status);
    requests.add(1, endpoint, status, provider);
    duration.observe((row.latencyMs ?? 0) / 1000, endpoint);
    const list: RequestAttempt[] = row.attempts ?? [];
    let upstreamMs = 0;
    for (const a of list) {
      attempts.add(1, a.provider, a.outcome);
      upstreamMs += a.latency_ms;
    }
    added.observe(Math.max(0, (row.latencyMs ?? 0) - upstreamMs) / 1000, endpoint);
    if (row.cacheStatus) cache.add(1, row.cacheStatus);
    const action = (row.guardrails as { action?: string } | null | undefined)?.action;
    if (action && action !== 'none') guardrails.add(1, action);
    if (row.errorCode) refusals.add(1, status, row.errorCode);
    if (typeof row.cost === 'number' && row.cost > 0 && row.priceSource !== 'gateway_cache') spend.add(row.cost, provider);
    // Model calls: what a provider served (a cache hit called none).
    if (row.provider && row.servedModel && row.priceSource !== 'gateway_cache') {
      const op = OPERATIONS[endpoint] ?? endpoint;
      const servedModel = models.label(row.orgId, provider, row.servedModel);
      const usage = row.usage as { prompt_tokens?: number; completion_tokens?: number } | null | undefined;
      if (typeof usage?.prompt_tokens === 'number') tokens.observe(usage.prompt_tokens, op, provider, servedModel, 'input');
      if (typeof usage?.completion_tokens === 'number') tokens.observe(usage.completion_tokens, op, provider, servedModel, 'output');
      const served = list.at(-1);
      if (served) operation.observe(served.latency_ms / 1000, op, provider, servedModel);
    }
  }
}

/** The ops port's settings (core/config.ts). */
export type OpsSettings = { GW_OPS_PORT?: number; GW_OPS_HOST: string; GW_METRICS_TOKEN?: string };

/**
 * The ops listener as configured: on GW_OPS_HOST (loopback unless the operator says otherwise),
 * behind GW_METRICS_TOKEN when one is set; null without GW_OPS_PORT. The API's, each worker's
 * and `npm start`'s.
 */
export function startConfiguredOpsServer(registry: Registry, config: OpsSettings): Promise<OpsServer> | null {
  return config.GW_OPS_PORT === undefined ? null : startOpsServer(registry, config.GW_OPS_PORT, config.GW_OPS_HOST, config.GW_METRICS_TOKEN);
}

/** `host:port` for the Temporal SDK's Prometheus exporter (an IPv6 host in brackets), or undefined without a port. */
export function temporalMetricsAddress(config: { GW_TEMPORAL_METRICS_PORT?: number; GW_TEMPORAL_METRICS_HOST: string }): string | undefined {
  if (config.GW_TEMPORAL_METRICS_PORT === undefined) return undefined;
  const host = config.GW_TEMPORAL_METRICS_HOST.includes(':') ? `[${config.GW_TEMPORAL_METRICS_HOST}]` : config.GW_TEMPORAL_METRICS_HOST;
  return `${host}:${config.GW_TEMPORAL_METRICS_PORT}`;
}

export type OpsServer = { port: number; address: string; close(): Promise<void> };

/**
 * What a process logs as its ops port starts: where it listens, and a warning when it listens
 * beyond this machine with no token (every scrape answered to whoever reaches the port).
 */
export function describeOpsServer(ops: OpsServer, config: OpsSettings): { message: string; warning: string | null } {
  const host = ops.address.includes(':') ? `[${ops.address}]` : ops.address;
  const message = `metrics on http://${host}:${ops.port}/metrics${config.GW_METRICS_TOKEN ? ' (bearer token required)' : ''}`;
  const loopback = ipaddr.isValid(ops.address) && ipaddr.process(ops.address).range() === 'loopback';
  const warning = loopback || config.GW_METRICS_TOKEN ? null : `metrics served beyond this machine (GW_OPS_HOST=${config.GW_OPS_HOST}) without GW_METRICS_TOKEN: their labels name tenants' models and their counters spend; set a token or keep the port behind a firewall`;
  return { message, warning };
}

/** SHA-256 of a token: compared digest to digest, equal lengths, in constant time. */
const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * The ops listener: `GET /metrics` in Prometheus's text format, and nothing else, on its own
 * port (GW_OPS_PORT), so the public port never serves it. With `token`, a scrape without
 * `Authorization: Bearer <token>` is answered 401 (Prometheus sends it from its scrape
 * config's `authorization`); the token is compared in constant time.
 */
export async function startOpsServer(registry: Registry, port: number, host: string, token?: string): Promise<OpsServer> {
  const expected = token === undefined ? null : digest(token);
  const presented = (header: string | undefined) => /^bearer +(\S+) *$/i.exec(header ?? '')?.[1] ?? '';
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (expected && !timingSafeEqual(digest(presented(req.headers.authorization)), expected)) {
      res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer realm="metrics"' }).end('a bearer token is required (GW_METRICS_TOKEN)\n');
      return;
    }
    registry.metrics().then((text) => {
      res.writeHead(200, { 'content-type': registry.contentType }).end(text);
    }, (err: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${(err as Error).message}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  return {
    port: bound.port,
    address: bound.address,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
