import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags, type Attributes, type AttributeValue, type HrTime } from '@opentelemetry/api';
import type { AddressInfo } from 'node:net';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { Resource } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import protobuf from 'protobufjs';
import { otlpJsonSpans } from '../../core/observability/otlp-json-spans';
import { otlpProtoSpans } from '../../core/observability/otlp-proto-spans';
import { batchSettings, RecordedSpan, SPAN_KIND, SpanRecorder, type AttributeReader, type BatchExport, type BatchSettings, type SpanEncoding } from '../../core/observability/span-recorder';
import { parseTraceparent, requestSampler, type CallerTrace } from '../../core/observability/tracing';
import { until } from '../helpers/until';

type OtlpValue = { stringValue?: string; intValue?: string; doubleValue?: number; boolValue?: boolean; arrayValue?: { values: OtlpValue[] } };
type OtlpSpan = {
  traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; startTimeUnixNano: string; endTimeUnixNano: string;
  attributes: Array<{ key: string; value: OtlpValue }>; events: Array<{ name: string; timeUnixNano: string; attributes: Array<{ key: string; value: OtlpValue }> }>; status?: { code: number; message?: string };
};

type OtlpBody = { resourceSpans: Array<{ resource: { attributes: Array<{ key: string; value: OtlpValue }> }; scopeSpans: Array<{ scope: { name: string }; spans: OtlpSpan[] }> }> };

/**
 * opentelemetry-proto's own definitions (the `.proto` files of its v1.0.0 release, which the
 * `@platformatic/promotel` package ships unchanged under `proto/`), loaded by protobufjs: the
 * bodies are read by the official schema, not by anything the gateway or a version of the SDK
 * generated.
 */
function otlpProtos(): protobuf.Root {
  const dir = path.join(path.dirname(require.resolve('@platformatic/promotel')), '..', 'proto');
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => path.join(dir, target);
  return root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto');
}
const ExportTraceServiceRequest = otlpProtos().lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');

/**
 * A protobuf body read by opentelemetry-proto's own schema, in OTLP JSON's shape: ids as hex,
 * 64-bit integers as decimal strings. `defaults` fills in every field left out (proto3's zero
 * values), to compare bodies field for field.
 */
function fromProtobuf(body: Buffer, options: { defaults?: boolean } = {}): OtlpBody {
  const decoded = ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(body), { longs: String, enums: Number, bytes: String, defaults: options.defaults ?? false }) as OtlpBody;
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

/** What a test span is made of, for the recorder and for the SDK alike. */
type SpanSpec = {
  traceId: string; parentSpanId?: string; name: string; kind: number; attributes: Attributes;
  later?: Array<[string, AttributeValue]>; events?: Array<[string, Attributes]>; status?: { code: number; message?: string };
};

/** Epoch nanoseconds (OTLP's decimal string) as the SDK's high-resolution time. */
const hrTimeOf = (nanos: string): HrTime => [Number(BigInt(nanos) / 1_000_000_000n), Number(BigInt(nanos) % 1_000_000_000n)];

/** The body of one POST to a local server: what an OTLP/HTTP exporter sent. */
async function receiveOne(send: (url: string) => Promise<void>): Promise<{ type: string | undefined; body: Buffer }> {
  let received: { type: string | undefined; body: Buffer } | undefined;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      received = { type: req.headers['content-type'], body: Buffer.concat(chunks) };
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  try {
    await send(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`);
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return received!;
}

describe('span recorder against the SDK\'s own OTLP exporter', () => {
  it('writes the bytes the SDK\'s protobuf exporter writes for the same spans, as opentelemetry-proto reads them', async () => {
    const resource = new Resource({ 'service.name': 'gw-test', 'service.version': '1.2.3', 'process.pid': 4321, 'host.arch': 'amd64' });
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const specs: SpanSpec[] = [
      {
        traceId, parentSpanId: '00f067aa0ba902b7', name: 'POST /v1/chat/completions', kind: SPAN_KIND.server,
        attributes: { 'http.request.method': 'POST', 'url.path': '/v1/chat/completions', 'url.scheme': 'http', 'gw.request_id': 'req_1' },
        later: [['http.route', '/v1/chat/completions'], ['http.response.status_code', 200], ['gw.cost_usd', 0.000123]],
        events: [['gw.cache', { 'gw.cache': 'miss' }], ['gw.spend.hold', { 'gw.spend.hold_usd': 0.25, 'gw.spend.blocking': true }], ['gw.guardrails', {}]],
      },
      {
        traceId, parentSpanId: '1111111111111111', name: 'chat gpt-4o-mini', kind: SPAN_KIND.client,
        attributes: {
          'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o-mini', 'gw.attempt.position': 0, negative: -7, large: 2 ** 40, largest: Number.MAX_SAFE_INTEGER,
          double: 0.1, tiny: 5e-324, yes: true, no: false, empty: '', accented: 'é'.repeat(100), emoji: '😀 ✓', long: 'z'.repeat(20_000), ascii200: 'y'.repeat(200),
          reasons: ['stop', 'length'], numbers: [1, 2.5, -3], flags: [true, false],
        },
        later: [['gw.failure_kind', 'rate_limit "quoted"'], ['error.type', 'rate_limit'], ['http.response.status_code', 429]],
        status: { code: 2, message: 'm'.repeat(140) },
      },
      { traceId: 'a'.repeat(32), name: `named ${'n'.repeat(300)}`, kind: SPAN_KIND.client, attributes: {}, events: [['e'.repeat(200), { ['x'.repeat(150)]: 'v'.repeat(150) }]], status: { code: 2 } },
      { traceId: '0af7651916cd43dd8448eb211c80319c', name: 'ok', kind: SPAN_KIND.server, attributes: { n: 1 }, status: { code: 1 } },
    ];

    // The recorder's body, as its delegate would send it.
    const bodies: Buffer[] = [];
    const capture: BatchExport = { export: (body, done) => void (bodies.push(Buffer.from(body)), done()), shutdown: async () => {} };
    const recorder = new SpanRecorder(resource, 'gateway', otlpProtoSpans, capture);
    for (const spec of specs) {
      const span = new RecordedSpan(recorder, spec.traceId, spec.parentSpanId, spec.name, spec.kind, spec.attributes);
      for (const [key, value] of spec.later ?? []) span.setAttribute(key, value);
      for (const [name, attributes] of spec.events ?? []) span.addEvent(name, attributes);
      if (spec.status) span.setStatus(spec.status);
      span.end();
    }
    await recorder.shutdown();
    expect(bodies).toHaveLength(1);
    const ours = fromProtobuf(bodies[0]!, { defaults: true });
    const encoded = ours.resourceSpans[0]!.scopeSpans[0]!.spans;

    // The same spans made by the SDK (same ids and times), sent by its OTLP/HTTP protobuf exporter.
    const ids = { traceId: '', spanId: '' };
    const made = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      resource, mergeResourceWithDefaults: false, sampler: new AlwaysOnSampler(), spanProcessors: [new SimpleSpanProcessor(made)],
      idGenerator: { generateTraceId: () => ids.traceId, generateSpanId: () => ids.spanId },
    });
    const tracer = provider.getTracer('gateway');
    specs.forEach((spec, i) => {
      const at = encoded[i]!;
      Object.assign(ids, { traceId: spec.traceId, spanId: at.spanId });
      const parent = spec.parentSpanId ? trace.setSpanContext(ROOT_CONTEXT, { traceId: spec.traceId, spanId: spec.parentSpanId, traceFlags: TraceFlags.SAMPLED, isRemote: true }) : ROOT_CONTEXT;
      const span = tracer.startSpan(spec.name, { kind: spec.kind - 1, attributes: spec.attributes, startTime: hrTimeOf(at.startTimeUnixNano) }, parent);
      for (const [key, value] of spec.later ?? []) span.setAttribute(key, value);
      (spec.events ?? []).forEach(([name, attributes], e) => span.addEvent(name, attributes, hrTimeOf(at.events[e]!.timeUnixNano)));
      if (spec.status) span.setStatus(spec.status);
      span.end(hrTimeOf(at.endTimeUnixNano));
    });
    const sent = await receiveOne((url) => new Promise<void>((resolve, reject) => {
      new OTLPTraceExporter({ url }).export(made.getFinishedSpans(), (result) => (result.error ? reject(result.error) : resolve()));
    }));
    await provider.shutdown();
    expect(sent.type).toBe('application/x-protobuf');
    const sdk = fromProtobuf(sent.body, { defaults: true });

    // Field for field, every default filled in. A span whose status was never set is UNSET either
    // way: the SDK writes an empty Status message, the recorder none (proto3 reads both alike).
    const unsetStatus = { code: 0, message: '' };
    for (const body of [ours, sdk]) for (const span of body.resourceSpans[0]!.scopeSpans[0]!.spans) span.status ??= unsetStatus;
    expect(ours).toEqual(sdk);
    expect(encoded.map((span) => span.name)).toEqual(specs.map((spec) => spec.name));
  });
});

describe('span recorder batches as OTEL_BSP_* says, as the SDK\'s batch span processor does', () => {
  /** What the SDK's processor reads from the same variables (its fields are private: read here only). */
  const sdkSettings = (env: Record<string, string>): BatchSettings => {
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      const bsp = new BatchSpanProcessor(new InMemorySpanExporter()) as unknown as Record<string, number>;
      return { maxQueueSize: bsp._maxQueueSize!, scheduledDelayMillis: bsp._scheduledDelayMillis!, maxExportBatchSize: bsp._maxExportBatchSize!, exportTimeoutMillis: bsp._exportTimeoutMillis! };
    } finally {
      process.env = saved;
    }
  };

  it('reads the four variables with the SDK\'s defaults and rules', () => {
    const envs: Array<Record<string, string>> = [
      {},
      { OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_SCHEDULE_DELAY: '250', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '50', OTEL_BSP_EXPORT_TIMEOUT: '1000' },
      { OTEL_BSP_MAX_QUEUE_SIZE: '10', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512' },
      { OTEL_BSP_MAX_QUEUE_SIZE: 'lots', OTEL_BSP_SCHEDULE_DELAY: '', OTEL_BSP_EXPORT_TIMEOUT: '1e3' },
    ];
    for (const env of envs) expect([env, batchSettings(env)]).toEqual([env, sdkSettings(env)]);
    expect(batchSettings({})).toEqual({ maxQueueSize: 2048, scheduledDelayMillis: 5000, maxExportBatchSize: 512, exportTimeoutMillis: 30000 });
  });

  /** A recorder whose exports wait until the test lets them finish (`release`), or finish at once once released. */
  function heldRecorder(batch: BatchSettings) {
    const exports: Array<{ names: string[]; done: () => void }> = [];
    let held = true;
    const out: BatchExport = {
      export(body, done) {
        exports.push({ names: fromProtobuf(Buffer.from(body)).resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.name), done });
        if (!held) done();
      },
      shutdown: async () => {},
    };
    const recorder = new SpanRecorder(new Resource({ 'service.name': 'gw-test' }), 'gateway', otlpProtoSpans, out, batch);
    const end = (name: string) => new RecordedSpan(recorder, '4bf92f3577b34da6a3ce929d0e0e4736', undefined, name, SPAN_KIND.client, {}).end();
    const release = () => {
      held = false;
      for (const e of exports) e.done();
    };
    return { recorder, exports, end, release };
  }

  it('sends OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans at a time, and drops what is past OTEL_BSP_MAX_QUEUE_SIZE while exports wait', async () => {
    const { recorder, exports, end, release } = heldRecorder({ ...batchSettings({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4', OTEL_BSP_MAX_QUEUE_SIZE: '10' }), exportTimeoutMillis: 60_000 });
    for (let i = 0; i < 30; i++) end(`s${i}`);
    void recorder.flush();
    // Ten waited (the queue's size); the first four are being sent, and nothing else until they are.
    await until(async () => (exports.length > 0 ? exports : null), 'the first export', 10_000, 5);
    expect(exports.map((e) => e.names)).toEqual([['s0', 's1', 's2', 's3']]);
    // With those on their way, six wait: four more may.
    for (let i = 30; i < 40; i++) end(`s${i}`);
    release();
    await recorder.shutdown();
    expect(exports.map((e) => e.names.length).every((n) => n <= 4)).toBe(true);
    expect(exports.flatMap((e) => e.names)).toEqual(['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7', 's8', 's9', 's30', 's31', 's32', 's33']);
  });

  it('starts the next export once one has taken OTEL_BSP_EXPORT_TIMEOUT', async () => {
    const { recorder, exports, end, release } = heldRecorder(batchSettings({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2', OTEL_BSP_EXPORT_TIMEOUT: '1' }));
    for (let i = 0; i < 5; i++) end(`s${i}`);
    // No export finishes: each gives way to the next after its timeout.
    await recorder.flush();
    expect(exports.map((e) => e.names)).toEqual([['s0', 's1'], ['s2', 's3'], ['s4']]);
    release();
  });

  it('sends a batch OTEL_BSP_SCHEDULE_DELAY after its first span, without a flush', async () => {
    // The recorder's clock is Jest's, moved by hand: no waiting, and no race with it.
    jest.useFakeTimers();
    try {
      const { exports, end, release } = heldRecorder(batchSettings({ OTEL_BSP_SCHEDULE_DELAY: '1000' }));
      end('first');
      await jest.advanceTimersByTimeAsync(600);
      end('second');
      await jest.advanceTimersByTimeAsync(399);
      expect(exports).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(exports.map((e) => e.names)).toEqual([['first', 'second']]);
      release();
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('request sampler against the SDK\'s sampler', () => {
  /** The SDK's decision for a span it starts in this trace under this caller, its provider configured by `env` alone. */
  function sdkSampler(env: Record<string, string>): (parent: CallerTrace | undefined, traceId: string) => boolean {
    const saved = { ...process.env };
    for (const name of ['OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG']) delete process.env[name];
    Object.assign(process.env, env);
    let next = '';
    try {
      const provider = new BasicTracerProvider({ idGenerator: { generateTraceId: () => next, generateSpanId: () => '00f067aa0ba902b7' } });
      const tracer = provider.getTracer('gateway');
      return (parent, traceId) => {
        next = traceId;
        const context = parent ? trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true }) : ROOT_CONTEXT;
        const span = tracer.startSpan('POST /v1/chat/completions', { kind: SpanKind.SERVER }, context);
        return (span.spanContext().traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
      };
    } finally {
      process.env = saved;
    }
  }

  it('decides as the SDK does for every sampler name and ratio, with and without a caller, on many trace ids', () => {
    const word = (n: number) => (n >>> 0).toString(16).padStart(8, '0');
    let seed = 0x9e3779b9;
    const random = () => (seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0);
    const ids = Array.from({ length: 3000 }, () => word(random()) + word(random()) + word(random()) + word(random()));
    // Trace ids at the ratio arithmetic's edges: the words' XOR at 0, just under half and at 0xffffffff.
    ids.push('00000000000000000000000000000001', `7fffffff${'0'.repeat(24)}`, `80000000${'0'.repeat(24)}`, `ffffffff${'0'.repeat(24)}`, `fffffffe${'0'.repeat(24)}`, 'f'.repeat(32));
    const envs: Array<Record<string, string>> = [
      {}, { OTEL_TRACES_SAMPLER: 'always_on' }, { OTEL_TRACES_SAMPLER: 'always_off' }, { OTEL_TRACES_SAMPLER: 'parentbased_always_on' }, { OTEL_TRACES_SAMPLER: 'parentbased_always_off' },
      ...['', '0', '1', '0.25', '0.5', '0.999', '1.5', '-1', 'abc', '1e-3'].map((arg) => ({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: arg })),
      { OTEL_TRACES_SAMPLER: 'traceidratio' },
      ...['0', '0.25', '1', ''].map((arg) => ({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: arg })),
      // Names are taken exactly: anything else is always_on, as the SDK takes it.
      { OTEL_TRACES_SAMPLER: 'TraceIdRatio', OTEL_TRACES_SAMPLER_ARG: '0' }, { OTEL_TRACES_SAMPLER: ' always_off' }, { OTEL_TRACES_SAMPLER: 'parentbased_bogus' },
    ];
    for (const env of envs) {
      const ours = requestSampler(env);
      const sdk = sdkSampler(env);
      const differ: string[] = [];
      for (const [i, traceId] of ids.entries()) {
        const caller = i % 3 === 0 ? undefined : { traceId, spanId: '00f067aa0ba902b7', sampled: i % 3 === 1 };
        if (ours(caller, traceId) !== sdk(caller, traceId)) differ.push(`${traceId}${caller ? (caller.sampled ? ' (sampled caller)' : ' (unsampled caller)') : ''}`);
      }
      expect([env, differ.slice(0, 5)]).toEqual([env, []]);
    }
  });
});

describe('the OTLP delegate the recorder exports through', () => {
  it('is declared at exactly the version the SDK\'s OTLP exporters use', () => {
    const root = path.join(__dirname, '../..');
    const read = (file: string) => JSON.parse(fs.readFileSync(path.join(root, file), 'utf8')) as { dependencies?: Record<string, string> };
    const declared = read('package.json').dependencies?.['@opentelemetry/otlp-exporter-base'];
    for (const exporter of ['exporter-trace-otlp-proto', 'exporter-trace-otlp-http']) {
      expect([exporter, declared]).toEqual([exporter, read(`node_modules/@opentelemetry/${exporter}/package.json`).dependencies!['@opentelemetry/otlp-exporter-base']]);
    }
  });
});
