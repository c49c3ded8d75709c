import { processTracingSetup, RequestTrace, startTracing, type Tracing } from '../../core/observability/tracing';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

type Span = { traceId: string; name: string; attributes: Array<{ key: string }>; events?: Array<{ name: string }> };
type Line = { resourceSpans: Array<{ scopeSpans: Array<{ spans: Span[] }> }> };
const spansOf = (line: string) => (JSON.parse(line) as Line).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));

/**
 * Traces on, with a sampler that keeps only what the caller sampled (`parentbased_always_off`):
 * an unsampled request still has its trace id (the answer's header and its row), and makes no
 * span, event or attribute in its steps (`RequestTrace.recording`); a sampled one in the same
 * process records its server span and its attempt's client span. The spans are read from
 * `OTEL_TRACES_EXPORTER=console`'s lines.
 */
describe('traces on, a request not sampled', () => {
  let f: ChatFixture;
  let secret: string;
  let tracing: Tracing;
  const written: string[] = [];
  let write: jest.SpyInstance;
  const hello = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] };

  beforeAll(async () => {
    Object.assign(process.env, { OTEL_TRACES_EXPORTER: 'console', OTEL_TRACES_SAMPLER: 'parentbased_always_off' });
    write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    // Before the API starts: its request middleware looks for the tracer once.
    tracing = startTracing('gw-api', { context: 'sync' })!;
    f = await startChatFixture();
    await f.connect('openai');
    secret = await f.key();
  });
  afterAll(async () => {
    await f.close();
    await processTracingSetup()?.shutdown();
    write.mockRestore();
    delete process.env.OTEL_TRACES_EXPORTER;
    delete process.env.OTEL_TRACES_SAMPLER;
  });

  it('answers with its trace id and logs it, and records no span of it; a sampled request beside it does', async () => {
    const child = jest.spyOn(RequestTrace.prototype, 'child');
    const unsampled = await f.chat(secret, hello);
    expect(unsampled.status).toBe(200);
    const traceId = unsampled.headers.get('x-gw-trace-id');
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    // The attempt made no client span.
    expect(child).not.toHaveBeenCalled();

    const sampledTrace = '0af7651916cd43dd8448eb211c80319c';
    const sampled = await f.chat(secret, hello, { traceparent: `00-${sampledTrace}-b7ad6b7169203331-01` });
    expect(sampled.status).toBe(200);
    expect(sampled.headers.get('x-gw-trace-id')).toBe(sampledTrace);
    expect(child).toHaveBeenCalledTimes(1);
    child.mockRestore();

    await f.api.runtime.deps.gateway.requestLog.flush();
    const row = (await f.client.get<Loose>(`/requests/${unsampled.id}`)).body;
    expect(row.trace_id).toBe(traceId);

    await tracing.shutdown();
    const spans = written.filter((w) => w.startsWith('{"resourceSpans"')).flatMap(spansOf);
    expect(spans.filter((s) => s.traceId === traceId)).toEqual([]);
    const mine = spans.filter((s) => s.traceId === sampledTrace);
    expect(mine.map((s) => s.name).sort()).toEqual(['POST /v1/chat/completions', 'chat gpt-4o-mini']);
    const server = mine.find((s) => s.name === 'POST /v1/chat/completions')!;
    expect(server.attributes.map((a) => a.key)).toEqual(expect.arrayContaining(['http.request.method', 'http.route', 'http.response.status_code', 'gw.request_id']));
    expect((server.events ?? []).map((e) => e.name)).toEqual(expect.arrayContaining(['gw.spend.hold']));
    const attempt = mine.find((s) => s.name === 'chat gpt-4o-mini')!;
    expect(attempt.attributes.map((a) => a.key)).toEqual(expect.arrayContaining(['gen_ai.operation.name', 'gen_ai.provider.name', 'gen_ai.response.model', 'gw.attempt.position']));
  });
});
