import { randomFillSync } from 'node:crypto';
import type { Attributes, AttributeValue, SpanContext } from '@opentelemetry/api';
import { createOtlpHttpExportDelegate, convertLegacyHttpOptions } from '@opentelemetry/otlp-exporter-base/node-http';
import type { Resource } from '@opentelemetry/resources';

/**
 * The gateway's own request spans (a server span per request, a client span per upstream
 * attempt), recorded as plain data and written straight to OTLP/HTTP JSON. The OpenTelemetry
 * SDK's span objects and its OTLP transformer cost more per request than the whole budget the
 * gateway gives traces (bench/results/2026-11-27-issue-36-traces.md): a span object with checked
 * attributes, then a second copy as OTLP objects, then protobuf. Here a span is its attributes
 * already encoded, and the batch is one string. What is not ours is kept: the export goes
 * through the maintained OTLP HTTP delegate (`@opentelemetry/otlp-exporter-base`), which reads
 * the endpoint, headers, timeout and compression from `OTEL_EXPORTER_OTLP_*` and retries as the
 * protocol says. Spans made by libraries (Temporal's interceptors) still go through the SDK,
 * parented on these by their span context.
 */

/** OTLP span kinds. */
export const SPAN_KIND = { server: 2, client: 3 } as const;

/** Batches of at most this many spans, sent at least every `FLUSH_MS`. */
const MAX_BATCH = 512;
const FLUSH_MS = 200;
/** Spans held while exports are slow or failing; beyond it new spans are dropped, as the SDK's queue does. */
const MAX_QUEUED = 4096;

/** The span-id and trace-id source: random bytes drawn a pool at a time, as hex. */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
function randomHex(bytes: number): string {
  if (poolAt + bytes > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const hex = pool.toString('hex', poolAt, poolAt + bytes);
  poolAt += bytes;
  return hex;
}
export const newTraceId = () => randomHex(16);
const newSpanId = () => randomHex(8);

/** Epoch nanoseconds as OTLP JSON writes them (a decimal string; a double cannot hold them). */
function nowNanos(): string {
  const ms = performance.timeOrigin + performance.now();
  const whole = Math.floor(ms);
  return `${whole}${String(Math.round((ms - whole) * 1e6)).padStart(6, '0')}`;
}

function encodeValue(value: AttributeValue): string {
  switch (typeof value) {
    case 'string':
      return `{"stringValue":${JSON.stringify(value)}}`;
    case 'boolean':
      return `{"boolValue":${value}}`;
    case 'number':
      return Number.isInteger(value) ? `{"intValue":"${value}"}` : `{"doubleValue":${value}}`;
    default:
      return `{"arrayValue":{"values":[${(value as Array<string | number | boolean | null | undefined>).filter((v) => v !== null && v !== undefined).map((v) => encodeValue(v as AttributeValue)).join(',')}]}}`;
  }
}

function encodeAttribute(key: string, value: AttributeValue): string {
  return `{"key":${JSON.stringify(key)},"value":${encodeValue(value)}}`;
}

function encodeAttributes(attributes: Attributes): string[] {
  const out: string[] = [];
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined && value !== null) out.push(encodeAttribute(key, value));
  }
  return out;
}

/** One span: the subset of OpenTelemetry's `Span` the gateway uses, so either can stand for the other. */
export class RecordedSpan {
  readonly spanId = newSpanId();
  private readonly start = nowNanos();
  private readonly attributes: string[];
  private readonly events: string[] = [];
  private status = '';
  private ended = false;

  constructor(
    private readonly recorder: SpanRecorder | null,
    readonly traceId: string,
    private readonly parentSpanId: string | undefined,
    private name: string,
    private readonly kind: number,
    attributes: Attributes,
  ) {
    this.attributes = recorder ? encodeAttributes(attributes) : [];
  }

  spanContext(): SpanContext {
    return { traceId: this.traceId, spanId: this.spanId, traceFlags: this.recorder ? 1 : 0 };
  }

  setAttribute(key: string, value: AttributeValue): this {
    if (this.recorder && !this.ended) this.attributes.push(encodeAttribute(key, value));
    return this;
  }

  addEvent(name: string, attributes: Attributes): this {
    if (this.recorder && !this.ended) this.events.push(`{"timeUnixNano":"${nowNanos()}","name":${JSON.stringify(name)},"attributes":[${encodeAttributes(attributes).join(',')}]}`);
    return this;
  }

  /** 2: error, with its message (OTLP's STATUS_CODE_ERROR). */
  setStatus(status: { code: number; message?: string }): this {
    if (this.recorder) this.status = `,"status":{"code":${status.code}${status.message ? `,"message":${JSON.stringify(status.message)}` : ''}}`;
    return this;
  }

  updateName(name: string): this {
    this.name = name;
    return this;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.recorder) return;
    this.recorder.add(`{"traceId":"${this.traceId}","spanId":"${this.spanId}"${this.parentSpanId ? `,"parentSpanId":"${this.parentSpanId}"` : ''},"name":${JSON.stringify(this.name)},"kind":${this.kind},` +
      `"startTimeUnixNano":"${this.start}","endTimeUnixNano":"${nowNanos()}","attributes":[${this.attributes.join(',')}],"events":[${this.events.join(',')}]${this.status}}`);
  }
}

type Delegate = ReturnType<typeof createOtlpHttpExportDelegate<string[], unknown>>;

/** Ended spans, batched and exported over OTLP/HTTP JSON by the maintained delegate. */
export class SpanRecorder {
  private queue: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly delegate: Delegate;
  private readonly head: string;

  constructor(resource: Resource, scopeName: string) {
    const resourceAttributes = encodeAttributes(resource.attributes).join(',');
    this.head = `{"resourceSpans":[{"resource":{"attributes":[${resourceAttributes}]},"scopeSpans":[{"scope":{"name":${JSON.stringify(scopeName)}},"spans":[`;
    const head = this.head;
    this.delegate = createOtlpHttpExportDelegate(convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }), {
      serializeRequest: (spans: string[]) => Buffer.from(`${head}${spans.join(',')}]}]}]}`),
      deserializeResponse: () => ({}),
    });
  }

  add(encoded: string): void {
    if (this.queue.length >= MAX_QUEUED) return;
    this.queue.push(encoded);
    if (this.queue.length >= MAX_BATCH) this.flushSoon(0);
    else this.flushSoon(FLUSH_MS);
  }

  private flushSoon(ms: number): void {
    if (this.timer && ms > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.flush(), ms);
    this.timer.unref();
  }

  /** Sends everything queued, a batch at a time. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH);
      await new Promise<void>((resolve) => this.delegate.export(batch, () => resolve()));
    }
  }

  async shutdown(): Promise<void> {
    await this.flush();
    await this.delegate.shutdown();
  }
}
