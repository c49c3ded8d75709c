import { ConfigError } from '../../core/config';
import { configuredExporters, processTracer, startTracing, traceIdOfTraceparent } from '../../core/observability/tracing';
import { manageClient } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

/**
 * Trace ids with traces off (no OTEL_* set, as in every other test): no tracer exists, and a
 * caller's `traceparent` is still echoed (`X-GW-Trace-Id`) and logged, so the caller's own trace
 * finds the request-log row. The row's trace link is the operator's only (issue 36).
 */
describe('trace ids without an exporter', () => {
  let f: ChatFixture;
  let secret: string;
  const hello = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] };

  beforeAll(async () => {
    f = await startChatFixture({ GW_TRACE_URL_TEMPLATE: 'https://traces.example/trace/{trace_id}?x=1' }, { operator: true });
    await f.connect('openai');
    secret = await f.key();
  });
  afterAll(() => f.close());

  const read = async (id: string) => {
    await f.api.runtime.deps.gateway.requestLog.flush();
    return (await f.client.get<Loose>(`/requests/${id}`)).body;
  };

  it('registers no tracer: nothing is traced', () => {
    expect(processTracer()).toBeUndefined();
  });

  it('echoes and logs the caller\'s trace id, linked in the operator\'s tracing UI', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const res = await f.chat(secret, hello, { traceparent: `00-${traceId}-b7ad6b7169203331-01` });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gw-trace-id')).toBe(traceId);
    const row = await read(res.id);
    expect([row.trace_id, row.trace_url]).toEqual([traceId, `https://traces.example/trace/${traceId}?x=1`]);
    // Filterable, in either case of hex.
    const listed = await f.client.get<{ data: Loose[] }>(`/requests?trace_id=${traceId.toUpperCase()}`);
    expect(listed.body.data.map((r) => r.id)).toEqual([res.id]);
    const bad = await f.client.get<{ error: { type: string } }>('/requests?trace_id=0af7651916cd43dd');
    expect([bad.status, bad.body.error.type]).toEqual([400, 'invalid_request_error']);
  });

  it('has no trace id without a traceparent, or with a malformed or all-zero one', async () => {
    for (const header of [undefined, 'not-a-traceparent', '00-00000000000000000000000000000000-b7ad6b7169203331-01', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01']) {
      const res = await f.chat(secret, hello, header ? { traceparent: header } : {});
      expect(res.status).toBe(200);
      expect(res.headers.get('x-gw-trace-id')).toBeNull();
      const row = await read(res.id);
      expect([row.trace_id, row.trace_url]).toEqual([null, null]);
    }
  });

  it('links the trace only for the operator\'s own organization', async () => {
    // Another organization's rows never carry the operator's tracing address.
    const other = await createTenant(f.database.db);
    const traceId = '1af7651916cd43dd8448eb211c80319c';
    const otherKey = await manageClient(f.api.url, other.token).post<{ secret: string }>('/gateway_keys', { label: 'other', project_id: other.projectId });
    expect(otherKey.status).toBe(201);
    const answer = await f.chat(otherKey.body.secret, hello, { traceparent: `00-${traceId}-b7ad6b7169203331-01` });
    await f.api.runtime.deps.gateway.requestLog.flush();
    const row = (await manageClient(f.api.url, other.token).get<Loose>(`/requests/${answer.id}`)).body;
    expect(row.trace_id).toBe(traceId);
    expect(row.trace_url).toBeNull();
  });
});

describe('traces configuration by OTEL_* only', () => {
  it('exports over OTLP when an endpoint is set, as the variables say otherwise', () => {
    expect(configuredExporters({})).toEqual([]);
    expect(configuredExporters({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual(['otlp']);
    expect(configuredExporters({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toEqual(['otlp']);
    expect(configuredExporters({ OTEL_TRACES_EXPORTER: 'otlp' })).toEqual(['otlp']);
    expect(configuredExporters({ OTEL_TRACES_EXPORTER: 'console,otlp' })).toEqual(['console', 'otlp']);
    expect(configuredExporters({ OTEL_TRACES_EXPORTER: 'otlp, console,otlp' })).toEqual(['otlp', 'console']);
    expect(configuredExporters({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual([]);
    expect(configuredExporters({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual([]);
  });

  it('refuses, in one line, an OTLP protocol it cannot speak', () => {
    expect(() => startTracing('gw-test', { env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' } })).toThrow(ConfigError);
    expect(() => startTracing('gw-test', { env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' } })).toThrow('OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: use http/protobuf (the default) or http/json');
    expect(processTracer()).toBeUndefined();
  });

  it('reads a W3C traceparent\'s trace id', () => {
    expect(traceIdOfTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOfTraceparent('00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01')).toBeUndefined();
    expect(traceIdOfTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01')).toBeUndefined();
    expect(traceIdOfTraceparent(undefined)).toBeUndefined();
  });
});
