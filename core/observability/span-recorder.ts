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
/** Ended spans are encoded this many at a time (or at the batch's flush). */
const ENCODE_EVERY = 32;

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

/**
 * Epoch nanoseconds as OTLP JSON writes them (a decimal string; a double cannot hold them), from a
 * `performance.now()` reading: to the microsecond, which a double holds exactly.
 */
function nanosOf(now: number): string {
  const micros = Math.round((TIME_ORIGIN + now) * 1000);
  const second = Math.floor(micros / 1_000_000);
  // A double past 2^31 is turned to text the slow way: the second's digits are kept, and only
  // the microseconds within it (a small integer, padded to six digits) are made each time.
  if (second !== secondOf) {
    secondOf = second;
    secondText = String(second);
  }
  return `${secondText}${String(1_000_000 + (micros - second * 1_000_000)).slice(1)}000`;
}
let secondOf = -1;
let secondText = '';
/** Read once: `performance.timeOrigin` is a getter that calls into Node each time. */
const TIME_ORIGIN = performance.timeOrigin;

/**
 * The same text as one flat string. Text built by concatenation is a tree of pieces, which every
 * span it is written into walks again; a string kept for reuse is made flat once.
 */
function flat(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** Each attribute key's encoded start, made once per key: keys are a small fixed set. */
const keyPrefixes = new Map<string, string>();
function keyPrefix(key: string): string {
  let prefix = keyPrefixes.get(key);
  if (prefix === undefined) {
    prefix = flat(`{"key":${JSON.stringify(key)},"value":`);
    if (keyPrefixes.size < 1000) keyPrefixes.set(key, prefix);
  }
  return prefix;
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

/**
 * Encoded string attributes by key, then by value: most values repeat from request to request
 * (the operation, the provider, the model, the path, the cache outcome), and a repeated value is
 * usually the same string object, whose hash V8 keeps. A key whose values keep changing (a
 * request id) fills its map and is then encoded afresh each time.
 */
const encodedStrings = new Map<string, Map<string, string>>();
const VALUES_KEPT_PER_KEY = 64;
const LONGEST_KEPT_VALUE = 128;

function encodeAttribute(key: string, value: AttributeValue): string {
  if (typeof value !== 'string' || value.length > LONGEST_KEPT_VALUE) return `${keyPrefix(key)}${encodeValue(value)}}`;
  let values = encodedStrings.get(key);
  if (values === undefined) {
    values = new Map();
    if (encodedStrings.size < 1000) encodedStrings.set(key, values);
  }
  let encoded = values.get(value);
  if (encoded === undefined) {
    encoded = `${keyPrefix(key)}{"stringValue":${JSON.stringify(value)}}}`;
    if (values.size < VALUES_KEPT_PER_KEY) values.set(value, (encoded = flat(encoded)));
  }
  return encoded;
}

/** Attributes as the comma-separated members of an OTLP attribute list. */
function encodeAttributes(attributes: Attributes): string {
  let out = '';
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined && value !== null) out = out ? `${out},${encodeAttribute(key, value)}` : encodeAttribute(key, value);
  }
  return out;
}

/** Reads a source's attributes onto a list, as key, value, key, value (`RecordedSpan.attributesFrom`). */
export type AttributeReader<T> = (source: T, out: Array<string | AttributeValue>) => void;

/**
 * One span: the subset of OpenTelemetry's `Span` the gateway uses, so either can stand for the
 * other. What is set on it is kept as given (references to strings and numbers the request
 * already holds) and encoded after it ends, in one go: strings made while a request is in
 * flight outlive young-generation collections that strings made and written at once do not.
 */
export class RecordedSpan {
  readonly spanId = newSpanId();
  private readonly start = performance.now();
  /** Attributes set after the start, as key, value, key, value. */
  private readonly later: Array<string | AttributeValue> = [];
  /** Events as reading, name, attributes. */
  private readonly events: Array<number | string | Attributes> = [];
  private status: { code: number; message?: string } | null = null;
  private ended = false;
  private finish = 0;
  /** Sources of attributes read when the span is encoded, as source, reader, source, reader. */
  private sources: unknown[] | null = null;

  constructor(
    private readonly recorder: SpanRecorder | null,
    readonly traceId: string,
    private readonly parentSpanId: string | undefined,
    private name: string,
    private readonly kind: number,
    private readonly attributes: Attributes,
  ) {}

  spanContext(): SpanContext {
    return { traceId: this.traceId, spanId: this.spanId, traceFlags: this.recorder ? 1 : 0 };
  }

  setAttribute(key: string, value: AttributeValue): this {
    if (this.recorder && !this.ended) this.later.push(key, value);
    return this;
  }

  /**
   * Attributes that `read` takes from `source` when the span is encoded rather than now: a
   * request's row, whose fields the span would otherwise copy while the request is in flight.
   * `read` pushes key, value, key, value onto the list it is given; `source` must not change
   * after the span ends.
   */
  attributesFrom<T>(source: T, read: AttributeReader<T>): this {
    if (this.recorder && !this.ended) (this.sources ??= []).push(source, read);
    return this;
  }

  addEvent(name: string, attributes: Attributes): this {
    if (this.recorder && !this.ended) this.events.push(performance.now(), name, attributes);
    return this;
  }

  /** 2: error, with its message (OTLP's STATUS_CODE_ERROR). */
  setStatus(status: { code: number; message?: string }): this {
    if (this.recorder) this.status = status;
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
    this.finish = performance.now();
    this.recorder.ended(this);
  }

  /** The span as OTLP JSON: called by the recorder for a few dozen ended spans at a time. */
  encode(): string {
    const sources = this.sources;
    if (sources) for (let i = 0; i < sources.length; i += 2) (sources[i + 1] as AttributeReader<unknown>)(sources[i], this.later);
    let attributes = encodeAttributes(this.attributes);
    for (let i = 0; i < this.later.length; i += 2) {
      const encoded = encodeAttribute(this.later[i] as string, this.later[i + 1] as AttributeValue);
      attributes = attributes ? `${attributes},${encoded}` : encoded;
    }
    let events = '';
    for (let i = 0; i < this.events.length; i += 3) {
      const event = `{"timeUnixNano":"${nanosOf(this.events[i] as number)}","name":${JSON.stringify(this.events[i + 1])},"attributes":[${encodeAttributes(this.events[i + 2] as Attributes)}]}`;
      events = events ? `${events},${event}` : event;
    }
    const status = this.status ? `,"status":{"code":${this.status.code}${this.status.message ? `,"message":${JSON.stringify(this.status.message)}` : ''}}` : '';
    return `{"traceId":"${this.traceId}","spanId":"${this.spanId}"${this.parentSpanId ? `,"parentSpanId":"${this.parentSpanId}"` : ''},"name":${JSON.stringify(this.name)},"kind":${this.kind},` +
      `"startTimeUnixNano":"${nanosOf(this.start)}","endTimeUnixNano":"${nanosOf(this.finish)}","attributes":[${attributes}]${events ? `,"events":[${events}]` : ''}${status}}`;
  }
}

type Delegate = ReturnType<typeof createOtlpHttpExportDelegate<Buffer, unknown>>;

/** A batch is written into a buffer of this size (a larger one for a span that needs it). */
const CHUNK_BYTES = 1 << 20;
/** Buffers kept for reuse once their export is done: one being written, one or two in flight. */
const SPARE_CHUNKS = 3;

/**
 * Ended spans, batched and exported over OTLP/HTTP JSON by the maintained delegate. Each span is
 * written into its batch's buffer as it is encoded (`ended`), outside the JavaScript heap: spans waiting up to
 * `FLUSH_MS` for their export would otherwise be strings that outlive young-generation
 * collections, which the collector copies and promotes. The buffer holds the whole request body
 * (the resource's head, the spans, the tail), so the delegate sends it as it is, and it is reused
 * once its export is done: a busy process allocating a fresh megabyte for every batch reports
 * that much external memory to V8 each time, which brings major collections forward.
 */
export class SpanRecorder {
  private readonly head: Buffer;
  private readonly tail = Buffer.from(']}]}]}');
  private readonly spare: Buffer[] = [];
  private chunk: Buffer | null = null;
  private used = 0;
  private count = 0;
  /** Batches written and not yet sent. */
  private readonly batches: Array<{ body: Buffer; chunk: Buffer; count: number }> = [];
  private queued = 0;
  /** Ended spans not yet encoded. */
  private readonly pending: RecordedSpan[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** The exports under way, one batch at a time. */
  private sending: Promise<void> = Promise.resolve();
  private readonly delegate: Delegate;

  constructor(resource: Resource, scopeName: string) {
    this.head = Buffer.from(`{"resourceSpans":[{"resource":{"attributes":[${encodeAttributes(resource.attributes)}]},"scopeSpans":[{"scope":{"name":${JSON.stringify(scopeName)}},"spans":[`);
    this.delegate = createOtlpHttpExportDelegate(convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }), {
      serializeRequest: (body: Buffer) => body,
      deserializeResponse: () => ({}),
    });
  }

  /**
   * Takes an ended span. Spans are encoded a few dozen at a time (`ENCODE_EVERY`, or when the
   * batch is flushed): one span's encoding, run once between two requests' other work, finds
   * its code and data out of the processor's caches and costs about twice what it costs in a
   * loop (bench/results/2026-11-27-issue-36-traces.md). The spans wait a few milliseconds, less
   * than the time between two young-generation collections.
   */
  ended(span: RecordedSpan): void {
    if (this.queued + this.pending.length >= MAX_QUEUED) return;
    this.pending.push(span);
    if (this.pending.length >= ENCODE_EVERY) this.writePending();
    else this.flushSoon(FLUSH_MS);
  }

  private writePending(): void {
    const spans = this.pending;
    for (let i = 0; i < spans.length; i++) this.write(spans[i]!.encode());
    spans.length = 0;
  }

  private write(encoded: string): void {
    if (this.queued >= MAX_QUEUED) return;
    // UTF-8 takes at most three bytes per UTF-16 unit, and one for the separating comma.
    const room = encoded.length * 3 + 1;
    if (this.chunk && this.used + room + this.tail.length > this.chunk.length) this.seal();
    if (!this.chunk) this.open(room);
    const chunk = this.chunk!;
    if (this.count > 0) chunk[this.used++] = 0x2c;
    this.used += chunk.write(encoded, this.used);
    this.count += 1;
    this.queued += 1;
    if (this.count >= MAX_BATCH) {
      this.seal();
      this.flushSoon(0);
    } else {
      this.flushSoon(FLUSH_MS);
    }
  }

  /** Starts a batch in a spare buffer, or a new one (larger when one span needs it). */
  private open(room: number): void {
    const size = this.head.length + room + this.tail.length;
    this.chunk = size <= CHUNK_BYTES ? (this.spare.pop() ?? Buffer.allocUnsafe(CHUNK_BYTES)) : Buffer.allocUnsafe(size);
    this.used = this.head.copy(this.chunk, 0);
  }

  /** Closes the batch being written: its body is the buffer up to the tail. */
  private seal(): void {
    const chunk = this.chunk;
    if (!chunk || this.count === 0) return;
    this.used += this.tail.copy(chunk, this.used);
    this.batches.push({ body: chunk.subarray(0, this.used), chunk, count: this.count });
    this.chunk = null;
    this.count = 0;
  }

  private recycle(chunk: Buffer): void {
    if (chunk.length === CHUNK_BYTES && this.spare.length < SPARE_CHUNKS) this.spare.push(chunk);
  }

  private flushSoon(ms: number): void {
    if (this.timer && ms > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.flush(), ms);
    this.timer.unref();
  }

  /** Sends everything queued, a batch at a time, after any export already under way. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.writePending();
    this.seal();
    this.sending = this.sending.then(() => this.sendQueued());
    return this.sending;
  }

  private async sendQueued(): Promise<void> {
    for (let batch = this.batches.shift(); batch; batch = this.batches.shift()) {
      const { body, chunk, count } = batch;
      // The delegate calls back once the export is over, retries included: the body is no longer read.
      await new Promise<void>((resolve) => this.delegate.export(body, () => resolve()));
      this.queued -= count;
      this.recycle(chunk);
    }
  }

  async shutdown(): Promise<void> {
    await this.flush();
    await this.delegate.shutdown();
  }
}
