import http from 'node:http';
import type { Attributes } from '@opentelemetry/api';
import type { AddressInfo } from 'node:net';
import { Resource } from '@opentelemetry/resources';
import { otlpJsonSpans } from '../../core/observability/otlp-json-spans';
import { otlpProtoSpans } from '../../core/observability/otlp-proto-spans';
import { RecordedSpan, SPAN_KIND, SpanRecorder, type AttributeReader, type SpanEncoding } from '../../core/observability/span-recorder';
import { parseTraceparent, requestSampler } from '../../core/observability/tracing';

type OtlpValue = { stringValue?: string; intValue?: string; doubleValue?: number; boolValue?: boolean; arrayValue?: { values: OtlpValue[] } };
type OtlpSpan = {
  traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; startTimeUnixNano: string; endTimeUnixNano: string;
  attributes: Array<{ key: string; value: OtlpValue }>; events: Array<{ name: string; timeUnixNano: string; attributes: Array<{ key: string; value: OtlpValue }> }>; status?: { code: number; message?: string };
};

type OtlpBody = { resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: OtlpValue }> }; scopeSpans: Array<{ scope: { name: string }; spans: OtlpSpan[] }> }> };

/**
 * A protobuf body read by opentelemetry-proto's own schema (the generated code the SDK's
 * transformer ships), in OTLP JSON's shape: ids as hex, 64-bit integers as decimal strings.
 */
function fromProtobuf(body: Buffer): OtlpBody {
  const type = protoRoot.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
  const decoded = type.toObject(type.decode(body), { longs: String, enums: Number, bytes: String }) as OtlpBody;
  const hex = (base64: string | undefined) => (base64 === undefined ? undefined : Buffer.from(base64, 'base64').toString('hex'));
  for (const resourceSpans of decoded.resourceSpans) {
    for (const scopeSpans of resourceSpans.scopeSpans) {
      for (const span of scopeSpans.spans) {
        span.traceId = hex(span.traceId)!;
        span.spanId = hex(span.spanId)!;
        if (span.parentSpanId !== undefined) span.parentSpanId = hex(span.parentSpanId);
      }
    }
  }
  return decoded;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const protoRoot = require('@opentelemetry/otlp-transformer/build/src/generated/root.js') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: { decode(body: Buffer): unknown; toObject(message: unknown, options: object): unknown } } } } } };
};

/**
 * The gateway's own request spans, written straight into OTLP/HTTP bodies (issue 36): protobuf,
 * the protocol's default, and JSON when `OTEL_EXPORTER_OTLP_PROTOCOL` says so.
 */
describe.each<[string, (resource: Attributes, scope: string) => SpanEncoding, string]>([
  ['protobuf', otlpProtoSpans, 'application/x-protobuf'],
  ['JSON', otlpJsonSpans, 'application/json'],
])('span recorder (OTLP %s)', (_protocol, encoding, contentType) => {
  let server: http.Server;
  const bodies: Array<{ path: string; type: string | undefined; body: OtlpBody }> = [];
  const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const type = req.headers['content-type'];
        bodies.push({ path: req.url ?? '', type, body: type === 'application/x-protobuf' ? fromProtobuf(body) : JSON.parse(body.toString('utf8')) });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('exports server and client spans to OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces', async () => {
    const recorder = new SpanRecorder(new Resource({ 'service.name': 'gw-test' }), 'gateway', encoding);
    const before = BigInt(Date.now()) * 1_000_000n;
    const server = new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 'POST /v1/chat/completions', SPAN_KIND.server, { 'http.request.method': 'POST', 'gw.request_id': 'req_1' });
    server.addEvent('gw.spend.hold', { 'gw.spend.hold_usd': 0.25, 'gw.spend.blocking': true });
    const attempt = new RecordedSpan(recorder, server.traceId, server.spanId, 'chat gpt-4o-mini', SPAN_KIND.client, { 'gen_ai.request.model': 'gpt-4o-mini' });
    attempt.setAttribute('gen_ai.usage.input_tokens', 12).setAttribute('gen_ai.response.finish_reasons', ['stop']).setAttribute('gw.failure_kind', 'rate_limit "quoted"');
    attempt.setStatus({ code: 2, message: 'rate_limit' });
    attempt.end();
    attempt.setAttribute('after.end', 'ignored');
    attempt.end();
    server.updateName('POST /v1/chat/completions (route)');
    server.end();
    await recorder.shutdown();

    expect(bodies).toHaveLength(1);
    expect([bodies[0]!.path, bodies[0]!.type]).toEqual(['/v1/traces', contentType]);
    const [resourceSpans] = bodies[0]!.body.resourceSpans;
    expect(resourceSpans!.resource.attributes).toContainEqual({ key: 'service.name', value: { stringValue: 'gw-test' } });
    const [scope] = resourceSpans!.scopeSpans;
    expect(scope!.scope.name).toBe('gateway');
    const [a, s] = scope!.spans;
    expect(s).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parentSpanId: '00f067aa0ba902b7', name: 'POST /v1/chat/completions (route)', kind: 2 });
    expect(s!.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(s!.events).toEqual([{ name: 'gw.spend.hold', timeUnixNano: expect.stringMatching(/^\d{19}$/), attributes: [{ key: 'gw.spend.hold_usd', value: { doubleValue: 0.25 } }, { key: 'gw.spend.blocking', value: { boolValue: true } }] }]);
    expect(a).toMatchObject({ traceId: s!.traceId, parentSpanId: s!.spanId, name: 'chat gpt-4o-mini', kind: 3, status: { code: 2, message: 'rate_limit' } });
    expect(a!.attributes).toEqual([
      { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o-mini' } },
      { key: 'gen_ai.usage.input_tokens', value: { intValue: '12' } },
      { key: 'gen_ai.response.finish_reasons', value: { arrayValue: { values: [{ stringValue: 'stop' }] } } },
      { key: 'gw.failure_kind', value: { stringValue: 'rate_limit "quoted"' } },
    ]);
    // Epoch nanoseconds, in order.
    const [start, end] = [BigInt(a!.startTimeUnixNano), BigInt(a!.endTimeUnixNano)];
    expect(start >= before - 1_000_000n).toBe(true);
    expect(end >= start).toBe(true);
  });

  it('encodes each span\'s own attribute values, repeated, many-valued and long ones alike', async () => {
    const recorder = new SpanRecorder(new Resource({ 'service.name': 'gw-test' }), 'gateway', encoding);
    const from = bodies.length;
    const long = (i: number) => `${'x'.repeat(150)}-${i}`;
    for (let i = 0; i < 300; i++) {
      const span = new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, `s${i}`, SPAN_KIND.client, { same: 'chat', many: `v${i}`, cycling: `c${i % 100} "q"` });
      span.setAttribute('long', long(i)).setAttribute('same', 'chat').setAttribute('cycling', `c${i % 100} "q"`);
      span.end();
    }
    await recorder.shutdown();
    const spans = bodies.slice(from).flatMap((b) => b.body.resourceSpans[0]!.scopeSpans[0]!.spans);
    expect(spans).toHaveLength(300);
    spans.forEach((span, i) => {
      expect([span.name, span.attributes]).toEqual([`s${i}`, [
        { key: 'same', value: { stringValue: 'chat' } },
        { key: 'many', value: { stringValue: `v${i}` } },
        { key: 'cycling', value: { stringValue: `c${i % 100} "q"` } },
        { key: 'long', value: { stringValue: long(i) } },
        { key: 'same', value: { stringValue: 'chat' } },
        { key: 'cycling', value: { stringValue: `c${i % 100} "q"` } },
      ]]);
    });
  });

  it('encodes every kind of attribute value, and strings and spans of any length', async () => {
    const recorder = new SpanRecorder(new Resource({ 'service.name': 'gw-test' }), 'gateway', encoding);
    const from = bodies.length;
    const values: Attributes = {
      zero: 0, int: 12, negative: -7, large: 2 ** 40, double: 0.25, yes: true, no: false, empty: '', list: ['a', 'b'], numbers: [1, 2.5],
      ascii200: 'y'.repeat(200), accented: 'é'.repeat(100), long: 'z'.repeat(20_000),
    };
    const span = new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, `named ${'n'.repeat(300)}`, SPAN_KIND.client, values);
    span.addEvent('e'.repeat(200), { ['x'.repeat(150)]: 'v'.repeat(150) });
    span.setStatus({ code: 2, message: 'm'.repeat(140) });
    span.end();
    // Beyond 2 MB: its lengths take more bytes, and its batch a buffer of its own.
    const huge = 'h'.repeat(3 << 20);
    new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, 'huge', SPAN_KIND.client, { huge }).end();
    new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, 'after', SPAN_KIND.client, { n: 1 }).end();
    await recorder.shutdown();
    const spans = bodies.slice(from).flatMap((b) => b.body.resourceSpans[0]!.scopeSpans[0]!.spans);
    expect(spans.map((s) => s.name)).toEqual([`named ${'n'.repeat(300)}`, 'huge', 'after']);
    expect(spans[0]!.attributes).toEqual([
      { key: 'zero', value: { intValue: '0' } },
      { key: 'int', value: { intValue: '12' } },
      { key: 'negative', value: { intValue: '-7' } },
      { key: 'large', value: { intValue: String(2 ** 40) } },
      { key: 'double', value: { doubleValue: 0.25 } },
      { key: 'yes', value: { boolValue: true } },
      { key: 'no', value: { boolValue: false } },
      { key: 'empty', value: { stringValue: '' } },
      { key: 'list', value: { arrayValue: { values: [{ stringValue: 'a' }, { stringValue: 'b' }] } } },
      { key: 'numbers', value: { arrayValue: { values: [{ intValue: '1' }, { doubleValue: 2.5 }] } } },
      { key: 'ascii200', value: { stringValue: 'y'.repeat(200) } },
      { key: 'accented', value: { stringValue: 'é'.repeat(100) } },
      { key: 'long', value: { stringValue: 'z'.repeat(20_000) } },
    ]);
    expect(spans[0]!.events).toEqual([{ name: 'e'.repeat(200), timeUnixNano: expect.stringMatching(/^\d{19}$/), attributes: [{ key: 'x'.repeat(150), value: { stringValue: 'v'.repeat(150) } }] }]);
    expect(spans[0]!.status).toEqual({ code: 2, message: 'm'.repeat(140) });
    expect(spans[1]!.attributes).toEqual([{ key: 'huge', value: { stringValue: huge } }]);
    expect(spans[2]!.attributes).toEqual([{ key: 'n', value: { intValue: '1' } }]);
  });

  it('reads attributes from a source when the span is encoded, after those set on it', async () => {
    const recorder = new SpanRecorder(new Resource({ 'service.name': 'gw-test' }), 'gateway', encoding);
    const from = bodies.length;
    const row = { model: 'gpt-4o-mini', tokens: 12 };
    const read: AttributeReader<typeof row> = (r, out) => void out.push('gen_ai.response.model', r.model, 'gen_ai.usage.input_tokens', r.tokens);
    const span = new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, 'chat gpt-4o-mini', SPAN_KIND.client, { 'gw.model': 'm' });
    span.setAttribute('gen_ai.response.finish_reasons', ['stop']).attributesFrom(row, read);
    span.end();
    span.attributesFrom({ model: 'after end', tokens: 0 }, read);
    await recorder.shutdown();
    const [encoded] = bodies.slice(from).flatMap((b) => b.body.resourceSpans[0]!.scopeSpans[0]!.spans);
    expect(encoded!.attributes).toEqual([
      { key: 'gw.model', value: { stringValue: 'm' } },
      { key: 'gen_ai.response.finish_reasons', value: { arrayValue: { values: [{ stringValue: 'stop' }] } } },
      { key: 'gen_ai.response.model', value: { stringValue: 'gpt-4o-mini' } },
      { key: 'gen_ai.usage.input_tokens', value: { intValue: '12' } },
    ]);
  });

  it('records nothing for an unsampled request, whose spans still have ids', async () => {
    const before = bodies.length;
    const span = new RecordedSpan(null, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, 'POST /v1/embeddings', SPAN_KIND.server, { a: 'b' });
    span.setAttribute('x', 1).addEvent('e', {});
    span.end();
    expect(span.spanContext()).toEqual({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: expect.stringMatching(/^[0-9a-f]{16}$/), traceFlags: 0 });
    expect(bodies.length).toBe(before);
  });

  it('sends a busy process\'s spans 512 to a batch, and a quiet one\'s small batches each intact', async () => {
    const recorder = new SpanRecorder(new Resource({ 'service.name': 'gw-test' }), 'gateway', encoding);
    const namesOf = (from: number) => bodies.slice(from).map((b) => b.body.resourceSpans[0]!.scopeSpans[0]!.spans.map((span) => span.name));
    const span = (name: string) => new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, name, SPAN_KIND.client, { 'gen_ai.request.model': `modèle ${name} ✓` });
    let from = bodies.length;
    for (let i = 0; i < 600; i++) span(`busy ${i}`).end();
    await recorder.flush();
    const busy = namesOf(from);
    expect(busy.map((names) => names.length)).toEqual([512, 88]);
    expect(busy.flat()).toEqual(Array.from({ length: 600 }, (_, i) => `busy ${i}`));
    // A batch is written while the one before it is still being sent: each has its own buffer.
    from = bodies.length;
    for (const round of ['first', 'second']) {
      for (let i = 0; i < 3; i++) span(`${round} ${i}`).end();
      void recorder.flush();
    }
    await recorder.flush();
    expect(namesOf(from)).toEqual([['first 0', 'first 1', 'first 2'], ['second 0', 'second 1', 'second 2']]);
    expect(bodies.at(-1)!.body.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.attributes).toEqual([{ key: 'gen_ai.request.model', value: { stringValue: 'modèle second 0 ✓' } }]);
    // Buffers whose export is done are written again: nothing of their earlier batches shows through.
    from = bodies.length;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 520; i++) span(`again ${round}.${i}`).end();
      void recorder.flush();
    }
    await recorder.shutdown();
    const again = namesOf(from);
    expect(again.map((names) => names.length)).toEqual([512, 8, 512, 8, 512, 8]);
    expect(again.flat()).toEqual([0, 1, 2].flatMap((round) => Array.from({ length: 520 }, (_, i) => `again ${round}.${i}`)));
  });
});

describe('request sampler', () => {
  it('samples as OTEL_TRACES_SAMPLER says, following a caller\'s flag when parent-based', () => {
    const sampledCaller = parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
    const unsampledCaller = parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00');
    expect(unsampledCaller).toEqual({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', sampled: false });
    const byDefault = requestSampler({});
    expect([byDefault(undefined, 'a'.repeat(32)), byDefault(sampledCaller, 'x'), byDefault(unsampledCaller, 'x')]).toEqual([true, true, false]);
    expect(requestSampler({ OTEL_TRACES_SAMPLER: 'always_on' })(unsampledCaller, 'x')).toBe(true);
    expect(requestSampler({ OTEL_TRACES_SAMPLER: 'always_off' })(sampledCaller, 'x')).toBe(false);
    // A ratio keeps about that share of trace ids, the same ids every time.
    const ratio = requestSampler({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' });
    const word = (n: number) => (n >>> 0).toString(16).padStart(8, '0');
    const ids = Array.from({ length: 4000 }, (_, i) => word(Math.imul(i, 2654435761)) + word(Math.imul(i, 40503)) + word(Math.imul(i + 7, 97)) + word(Math.imul(i, 2246822519)));
    const kept = ids.filter((id) => ratio(undefined, id)).length;
    expect(kept / ids.length).toBeGreaterThan(0.2);
    expect(kept / ids.length).toBeLessThan(0.3);
    expect(ids.filter((id) => ratio(undefined, id)).length).toBe(kept);
    expect(requestSampler({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' })(sampledCaller, 'x')).toBe(true);
  });
});
