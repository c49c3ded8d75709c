import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import { requestLogs } from '../../core/db/schema';
import { startTracing, type Tracing } from '../../core/observability/tracing';
import { jaegerBinary, startJaeger, type JaegerServer } from '../../scripts/lib/jaeger';
import { freePort } from '../../scripts/lib/ports';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress, uniquePrefix } from '../helpers/harness';
import { createLocalCa, type LocalCa } from '../helpers/local-ca';
import { until } from '../helpers/until';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/**
 * Traces end to end into a real Jaeger (built once per machine by scripts/setup-jaeger, which
 * `npm test` runs): the API in this process and the jobs and webhooks workers in their own
 * export over OTLP, configured only by the standard OTEL_* variables; the test reads each trace
 * back from Jaeger's query API (issue 36).
 */
const JAEGER = jaegerBinary();
const SCALE = 0.0002;

type JaegerSpan = {
  traceID: string; spanID: string; operationName: string; startTime: number; processID: string;
  references: Array<{ refType: string; spanID: string; traceID: string }>;
  tags: Array<{ key: string; value: unknown }>;
  logs: Array<{ fields: Array<{ key: string; value: unknown }> }>;
};
type JaegerTrace = { spans: JaegerSpan[]; processes: Record<string, { serviceName: string }> };

const tag = (span: JaegerSpan, key: string) => span.tags.find((t) => t.key === key)?.value;
const parentOf = (span: JaegerSpan) => span.references.find((r) => r.refType === 'CHILD_OF')?.spanID;

describe('OpenTelemetry traces in Jaeger', () => {
  const prefix = uniquePrefix('traces');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true', GW_PUBLIC_URL: 'https://gw.test' };
  let jaeger: JaegerServer;
  let tracing: Tracing | undefined;
  let f: ChatFixture;
  let jobsWorker: WorkerProcess | undefined;
  let webhooksWorker: WorkerProcess | undefined;
  let ca: LocalCa;
  let receiver: WebhookReceiver;
  let secret: string;
  let dir: string;
  const saved = { ...process.env };

  /** The trace as Jaeger has it once `ready` says every expected span arrived. */
  async function traceOf(traceId: string, ready: (t: JaegerTrace) => boolean, what: string): Promise<JaegerTrace> {
    let last: JaegerTrace | null = null;
    return until(async () => {
      const res = await fetch(`${jaeger.url}/api/traces/${traceId}`);
      if (res.status !== 200) return null;
      const body = (await res.json()) as { data: JaegerTrace[] };
      last = body.data[0] ?? null;
      return last && ready(last) ? last : null;
    }, `${what} in Jaeger (last seen: ${JSON.stringify(last && (last as JaegerTrace).spans.map((s) => s.operationName))})`, 30_000, 250);
  }

  beforeAll(async () => {
    if (!JAEGER) throw new Error('No Jaeger: npm test builds it once per machine (scripts/setup-jaeger), or set JAEGER_PATH.');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-jaeger-'));
    jaeger = await startJaeger({
      binary: JAEGER, dir,
      ports: { ui: await freePort(), otlpHttp: await freePort(), otlpGrpc: await freePort(), queryGrpc: await freePort(), health: await freePort() },
    });
    // Only the standard variables: the endpoint, and a short batch delay so the test waits less.
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpUrl, OTEL_BSP_SCHEDULE_DELAY: '100' };
    Object.assign(process.env, otel);
    // The API here as in production: its requests' traces passed explicitly, no async context.
    tracing = startTracing('gw-api', { context: 'sync' });
    ca = createLocalCa();
    receiver = await startWebhookReceiver(ca);
    f = await startChatFixture(env);
    jobsWorker = await startWorkerProcess('jobs', prefix, { ...env, ...otel });
    // This one exports OTLP as JSON (the standard protocol variable), the others protobuf.
    webhooksWorker = await startWorkerProcess('webhooks', prefix, { ...env, ...otel, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', NODE_EXTRA_CA_CERTS: ca.caFile });
    secret = await f.key({ rate_limit_rpm: 50000, observability_access: 'organization' });
  }, 90_000);
  afterAll(async () => {
    await webhooksWorker?.stop();
    await jobsWorker?.stop();
    await f?.close();
    await tracing?.shutdown();
    await receiver?.close();
    await jaeger?.stop();
    process.env = saved;
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('shows a chat request as its server span, joined to the caller\'s trace, with two failed attempts and the serving one in order', async () => {
    const t = `t${Date.now()}`;
    const down = await f.connect('openai', { directives: `status=500,tag=${t}a` });
    const limited = await f.connect('openai', { directives: `status=429,tag=${t}b` });
    const good = await f.connect('openai');
    const slug = `traced-${Date.now()}`;
    expect((await f.client.post('/routes', {
      slug,
      targets: [{ connection_id: down, model: 'gpt-4o-mini' }, { connection_id: limited, model: 'gpt-4o-mini' }, { connection_id: good, model: 'gpt-4o-mini' }],
      failover: { server_error: 'failover', rate_limit: 'failover' },
      max_retries: 0,
    })).status).toBe(201);
    await f.settle();

    // The caller's own trace: the gateway's server span is a child of its span.
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    const res = await f.chat(secret, { model: slug, messages: [{ role: 'user', content: 'Say hello' }] }, { traceparent: `00-${callerTrace}-${callerSpan}-01` });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gw-trace-id')).toBe(callerTrace);

    const trace = await traceOf(callerTrace, (tr) => tr.spans.filter((s) => tag(s, 'gen_ai.operation.name') === 'chat' && parentOf(s) !== callerSpan).length === 3 && tr.spans.some((s) => parentOf(s) === callerSpan), 'the chat trace');
    const server = trace.spans.find((s) => parentOf(s) === callerSpan)!;
    expect(server.operationName).toBe('POST /v1/chat/completions');
    expect(trace.processes[server.processID]!.serviceName).toBe('gw-api');
    expect(tag(server, 'http.response.status_code')).toBe(200);
    expect(tag(server, 'gw.route')).toBe(slug);
    expect(tag(server, 'gw.request_id')).toBe(res.id);
    // The spend hold is an event of the server span.
    expect(server.logs.some((l) => l.fields.some((x) => x.key === 'event' && x.value === 'gw.spend.hold'))).toBe(true);

    const attempts = trace.spans.filter((s) => parentOf(s) === server.spanID).sort((a, b) => a.startTime - b.startTime);
    expect(attempts.map((s) => [s.operationName, tag(s, 'gw.attempt.position'), tag(s, 'gw.failure_kind') ?? null, tag(s, 'gw.connection.id')])).toEqual([
      ['chat gpt-4o-mini', 'primary', 'server_error', down],
      ['chat gpt-4o-mini', 'standby_a', 'rate_limit', limited],
      ['chat gpt-4o-mini', 'standby_b', null, good],
    ]);
    for (const a of attempts) {
      expect(tag(a, 'span.kind')).toBe('client');
      expect([tag(a, 'gen_ai.provider.name'), tag(a, 'gen_ai.request.model')]).toEqual(['openai', 'gpt-4o-mini']);
    }
    expect(tag(attempts[0]!, 'error.type')).toBe('server_error');
    expect(tag(attempts[0]!, 'http.response.status_code')).toBe(500);
    const served = attempts[2]!;
    expect(tag(served, 'gen_ai.response.model')).toBe(res.json.model);
    expect([tag(served, 'gen_ai.usage.input_tokens'), tag(served, 'gen_ai.usage.output_tokens')]).toEqual([res.json.usage.prompt_tokens, res.json.usage.completion_tokens]);
    expect(tag(served, 'gen_ai.response.finish_reasons')).toBe(JSON.stringify(['stop']));
    expect(typeof tag(served, 'gw.cost_usd')).toBe('number');

    // The request-log row carries the trace id, readable and filterable.
    await f.api.runtime.deps.gateway.requestLog.flush();
    const [row] = await f.database.db.select({ traceId: requestLogs.traceId }).from(requestLogs).where(eq(requestLogs.id, res.id));
    expect(row!.traceId).toBe(callerTrace);
    const listed = await f.client.get<{ data: Loose[] }>(`/requests?trace_id=${callerTrace.toUpperCase()}`);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((r) => [r.id, r.trace_id])).toEqual([[res.id, callerTrace]]);
    expect((await f.client.get('/requests?trace_id=not-a-trace')).status).toBe(400);
  });

  it('links a video job\'s submit to its workflow, its activities (status checks included) and its webhook delivery', async () => {
    const endpoint = await f.client.post<{ id: string }>('/webhook_endpoints', { url: receiver.url('/traced') });
    expect(endpoint.status).toBe(201);
    await f.connect('openai', { name: 'videos' });
    const created = await fetch(`${f.api.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: JSON.stringify({ model: 'openai/sora-2', duration_seconds: 4, prompt: `traced clip [sandbox render_ms=300] ${Date.now()}` }),
    });
    expect(created.status).toBe(202);
    const traceId = created.headers.get('x-gw-trace-id')!;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    await until(async () => receiver.received('/traced').length >= 1 || null, 'the job\'s webhook', 30_000);

    const names = (tr: JaegerTrace) => tr.spans.map((s) => s.operationName);
    const trace = await traceOf(traceId, (tr) => ['RunWorkflow:videoJob', 'RunActivity:awaitRender', 'RunWorkflow:webhookDelivery', 'RunActivity:deliver'].every((n) => names(tr).includes(n)), 'the video job trace');
    const byName = (n: string) => trace.spans.filter((s) => s.operationName === n);
    const server = byName('POST /v1/videos')[0]!;
    expect(parentOf(server)).toBeUndefined();
    // submit → start → run → each activity, every link a parent reference within the one trace.
    const start = byName('StartWorkflow:videoJob')[0]!;
    expect(parentOf(start)).toBe(server.spanID);
    const run = byName('RunWorkflow:videoJob')[0]!;
    expect(parentOf(run)).toBe(start.spanID);
    expect([trace.processes[server.processID]!.serviceName, trace.processes[run.processID]!.serviceName]).toEqual(['gw-api', 'gw-worker-jobs']);
    const scheduled = trace.spans.filter((s) => s.operationName.startsWith('StartActivity:') && parentOf(s) === run.spanID).map((s) => s.operationName);
    expect(scheduled).toEqual(expect.arrayContaining(['StartActivity:submitVideo', 'StartActivity:awaitRender']));
    // The status checks ride the activity's retry policy: each check is a run of `awaitRender`.
    expect(byName('RunActivity:awaitRender').length).toBeGreaterThanOrEqual(1);
    // The delivery ran in the webhooks worker's own process and exported there.
    const delivery = byName('RunActivity:deliver')[0]!;
    expect(trace.processes[delivery.processID]!.serviceName).toBe('gw-worker-webhooks');
    const runDelivery = byName('RunWorkflow:webhookDelivery')[0]!;
    const startDelivery = trace.spans.find((s) => s.spanID === parentOf(runDelivery))!;
    expect(startDelivery.operationName).toBe('StartWorkflow:webhookDelivery');
  });
});
