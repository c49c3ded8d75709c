import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Resource } from '@opentelemetry/resources';
import { otlpJsonSpans } from '../../core/observability/otlp-json-spans';
import { consoleBatchExport, fanOutSpans, RecordedSpan, SPAN_KIND, SpanRecorder } from '../../core/observability/span-recorder';
import { startTracing } from '../../core/observability/tracing';

type Line = { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ name: string; traceId: string; attributes: Array<{ key: string }> }> }> }> };
const spansOf = (line: string) => (JSON.parse(line) as Line).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));

/**
 * `OTEL_TRACES_EXPORTER=console`: the gateway's own request spans are written to standard output
 * as OTLP JSON lines, like the SDK's spans go to the console, and nothing is sent to an OTLP
 * endpoint (before, they went to the OTLP default endpoint whatever the variable said).
 */
describe('request spans on the console', () => {
  let otlp: http.Server;
  let otlpBodies = 0;
  const saved = { ...process.env };

  beforeAll(async () => {
    otlp = http.createServer((req, res) => {
      otlpBodies += 1;
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((resolve) => otlp.listen(0, '127.0.0.1', () => resolve()));
  });
  afterAll(async () => {
    process.env = saved;
    await new Promise<void>((resolve) => otlp.close(() => resolve()));
  });

  it('a console recorder writes each batch as one OTLP JSON line, the row attributes read once ended', async () => {
    const lines: string[] = [];
    const recorder = new SpanRecorder(new Resource({ 'service.name': 'gw-test' }), 'gateway', otlpJsonSpans, consoleBatchExport((l) => lines.push(l)));
    const server = new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, 'POST /v1/chat/completions', SPAN_KIND.server, { 'gw.request_id': 'req_1' });
    server.attributesFrom({ cost: 0.5 }, (row, out) => out.push('gw.cost_usd', row.cost));
    server.end();
    await recorder.shutdown();
    expect(lines).toHaveLength(1);
    expect(lines[0]!.endsWith('\n')).toBe(true);
    expect(lines[0]!.trimEnd()).not.toContain('\n');
    const [span] = spansOf(lines[0]!);
    expect(span).toMatchObject({ name: 'POST /v1/chat/completions', traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    expect(span!.attributes.map((a) => a.key)).toEqual(['gw.request_id', 'gw.cost_usd']);
  });

  it('fanned out, each recorder gets every span with its deferred attributes', async () => {
    const a: string[] = [];
    const b: string[] = [];
    const resource = new Resource({ 'service.name': 'gw-test' });
    const both = fanOutSpans([a, b].map((lines) => new SpanRecorder(resource, 'gateway', otlpJsonSpans, consoleBatchExport((l) => lines.push(l)))));
    const span = new RecordedSpan(both, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, 'chat gpt-4o-mini', SPAN_KIND.client, {});
    span.attributesFrom({ model: 'gpt-4o-mini-2024-07-18' }, (row, out) => out.push('gen_ai.response.model', row.model));
    span.end();
    await both.shutdown();
    for (const lines of [a, b]) {
      expect(lines.flatMap(spansOf).map((s) => [s.name, s.attributes.map((x) => x.key)])).toEqual([['chat gpt-4o-mini', ['gen_ai.response.model']]]);
    }
  });

  it('OTEL_TRACES_EXPORTER=console: the request spans go to standard output, none to the OTLP endpoint', async () => {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(otlp.address() as AddressInfo).port}`;
    process.env.OTEL_TRACES_EXPORTER = 'console';
    const written: string[] = [];
    const write = jest.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    try {
      const tracing = startTracing('gw-test', { context: 'sync' })!;
      const span = new RecordedSpan(tracing.recorder, '0af7651916cd43dd8448eb211c80319c', undefined, 'POST /v1/embeddings', SPAN_KIND.server, {});
      span.end();
      await tracing.shutdown();
    } finally {
      write.mockRestore();
    }
    const lines = written.filter((w) => w.startsWith('{"resourceSpans"'));
    expect(lines.flatMap(spansOf).map((s) => [s.name, s.traceId])).toEqual([['POST /v1/embeddings', '0af7651916cd43dd8448eb211c80319c']]);
    expect(otlpBodies).toBe(0);
  });
});
