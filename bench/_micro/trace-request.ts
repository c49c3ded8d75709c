/**
 * Micro-benchmark: one traced request's telemetry work (server and attempt spans, three events,
 * the row's attributes, the request metrics) outside the server, exports answered at once.
 * `npx tsx bench/_micro/trace-request.ts`: CPU µs a request in a loop (caches warm).
 * `TIMED=1`: each request timed alone; `COLD=1` with it sweeps 8 MB of memory between requests,
 * as a server's other work does to the caches. `NO_METRICS=1` leaves the metrics out; `JSON=1` writes
 * OTLP JSON instead of protobuf.
 * Not part of `npm run bench`; see bench/results/2026-11-27-issue-36-traces.md.
 */
import { Resource } from '@opentelemetry/resources';
import { endRequestFromRow, keepServedAttempt, startAttemptSpan } from '../../core/observability/attempt-spans';
import { createGatewayMetrics } from '../../core/observability/metrics';
import { otlpJsonSpans } from '../../core/observability/otlp-json-spans';
import { otlpProtoSpans } from '../../core/observability/otlp-proto-spans';
import { newTraceId, RecordedSpan, SPAN_KIND, SpanRecorder } from '../../core/observability/span-recorder';
import { RequestTrace, traceEvent } from '../../core/observability/tracing';
import type { RequestLogEntry } from '../../core/request-log/writer';
import type { Candidate } from '../../core/routing/candidates';

process.env.OTEL_EXPORTER_OTLP_ENDPOINT = 'http://127.0.0.1:9';
// Exports go nowhere: each is answered at once, so its buffer is reused as in a healthy process.
const recorder = new SpanRecorder(new Resource({ 'service.name': 'bench' }), 'gateway', process.env.JSON ? otlpJsonSpans : otlpProtoSpans, {
  export: (_body, done) => done(),
  shutdown: async () => {},
});
// Every model known: a request pays the label's memo lookup either way (model-labels.ts).
const metrics = process.env.NO_METRICS ? null : createGatewayMetrics('api', (_kind, model) => model);
const candidate = { connection: { id: 'conn_0123456789', kind: 'openai', baseUrl: 'http://127.0.0.1:4010/v1' }, upstreamModel: 'gpt-4o-mini', modelId: 'gpt-4o-mini' } as unknown as Candidate;
const answer = { choices: [{ finish_reason: 'stop' }] };

function one(i: number): void {
  const span = new RecordedSpan(recorder, newTraceId(), undefined, 'POST /v1/chat/completions', SPAN_KIND.server, {
    'http.request.method': 'POST', 'url.path': '/v1/chat/completions', 'url.scheme': 'http', 'gw.request_id': `req_${i}abcdef0123456789`,
  });
  const rt = new RequestTrace(span, 'chat', recorder);
  traceEvent(rt, 'gw.cache', { 'gw.cache': 'miss' });
  traceEvent(rt, 'gw.guardrails', { 'gw.guardrails.action': 'none' });
  traceEvent(rt, 'gw.spend.hold', { 'gw.spend.hold_usd': 0.00123, 'gw.spend.blocking': true });
  keepServedAttempt(rt, candidate, startAttemptSpan(rt, candidate, 'primary'), answer);
  const row = {
    id: `req_${i}abcdef0123456789`, endpoint: 'chat.completions', provider: 'openai', status: 200, latencyMs: 3, routeSlug: null, cacheStatus: 'miss',
    cost: 0.0000123, requestedModel: 'gpt-4o-mini', servedModel: JSON.parse('"gpt-4o-mini-2024-07-18"'), connectionId: 'conn_0123456789',
    usage: { prompt_tokens: 12, completion_tokens: 20 }, priceSource: 'catalog', errorCode: null, guardrails: null,
    attempts: [{ provider: 'openai', outcome: 'ok', latency_ms: 2 }],
  } as unknown as RequestLogEntry;
  metrics?.observeRequest(row);
  endRequestFromRow(rt, row);
  span.setAttribute('http.route', '/v1/chat/completions');
  span.updateName('POST /v1/chat/completions');
  span.setAttribute('http.response.status_code', 200);
  rt.endAll();
  span.end();
}

const sweep = new Float64Array(1 << 20);
let swept = 0;
/** Average wall µs of `one` alone over `n` requests, caches swept between them with COLD=1. */
function timedAlone(n: number): number {
  let spent = 0;
  for (let i = 0; i < n; i++) {
    if (process.env.COLD) for (let j = 0; j < sweep.length; j += 8) swept += sweep[j]!;
    const t = performance.now();
    one(i);
    spent += performance.now() - t;
  }
  return (spent * 1000) / n;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
const N = 200_000;

async function main(): Promise<void> {
  for (let round = 0; round < 5; round++) {
    if (process.env.TIMED) {
      let us = 0;
      for (let k = 0; k < 100; k++) {
        us += timedAlone(200);
        await turn();
      }
      console.log(`${(us / 100).toFixed(2)} µs a request (timed alone${process.env.COLD ? ', caches swept' : ''})`);
    } else {
      const t0 = process.cpuUsage();
      for (let i = 0; i < N; i++) {
        one(i);
        // Lets the recorder's timers run, as between a server's requests.
        if (i % 200 === 199) await turn();
      }
      const t = process.cpuUsage(t0);
      console.log(`${((t.user + t.system) / N).toFixed(2)} µs a request`);
    }
  }
  if (swept < 0) console.log(swept);
}

void main();
