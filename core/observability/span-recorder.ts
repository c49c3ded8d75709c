import { randomFillSync } from 'node:crypto';
import type { Attributes, AttributeValue, SpanContext } from '@opentelemetry/api';
import { DEFAULT_ENVIRONMENT, parseEnvironment } from '@opentelemetry/core';
import { createOtlpHttpExportDelegate, convertLegacyHttpOptions } from '@opentelemetry/otlp-exporter-base/node-http';
import type { Resource } from '@opentelemetry/resources';

/**
 * The gateway's own request spans (a server span per request, a client span per upstream
 * attempt), recorded as plain data and written straight into an OTLP/HTTP request body
 * (protobuf by default, JSON when `OTEL_EXPORTER_OTLP_PROTOCOL` asks). The OpenTelemetry
 * SDK's span objects and its OTLP transformer cost more per request than the whole budget the
 * gateway gives traces (bench/results/2026-11-27-issue-36-traces.md): a span object with checked
 * attributes, then a second copy as OTLP objects, then protobuf. Here a span keeps what was set
 * on it and is written into its batch's buffer once it ends. What is not ours is kept: the export goes
 * through the maintained OTLP HTTP delegate (`@opentelemetry/otlp-exporter-base`, declared at the
 * exact version the SDK's exporters use: its API is internal to OpenTelemetry and changes between
 * releases), which reads the endpoint, headers, timeout and compression from `OTEL_EXPORTER_OTLP_*`
 * and retries as the protocol says; batches are as `OTEL_BSP_*` says, read as the SDK's batch
 * span processor reads them (`batchSettings`). Spans made by libraries (Temporal's interceptors)
 * still go through the SDK, parented on these by their span context.
 */

/** OTLP span kinds. */
export const SPAN_KIND = { server: 2, client: 3 } as const;

/**
 * How ended spans are batched: `OTEL_BSP_MAX_QUEUE_SIZE` (spans waiting for export; past it new
 * spans are dropped), `OTEL_BSP_SCHEDULE_DELAY` (ms from a batch's first span to its export),
 * `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (spans in one export, sent at once when reached) and
 * `OTEL_BSP_EXPORT_TIMEOUT` (ms an export may take before the next one starts), with the SDK's
 * defaults: 2048, 5000, 512 and 30000.
 */
export type BatchSettings = { maxQueueSize: number; scheduledDelayMillis: number; maxExportBatchSize: number; exportTimeoutMillis: number };

/**
 * `OTEL_BSP_*` read by the SDK's own parser (@opentelemetry/core), so the gateway's request spans
 * and the spans the SDK exports (Temporal's) are batched alike; a batch is at most the queue, as
 * the SDK's processor holds it.
 */
export function batchSettings(env: NodeJS.ProcessEnv = process.env): BatchSettings {
  const read = Object.assign({}, DEFAULT_ENVIRONMENT, parseEnvironment(env as Record<string, string>));
  const maxQueueSize = read.OTEL_BSP_MAX_QUEUE_SIZE;
  return {
    maxQueueSize,
    scheduledDelayMillis: read.OTEL_BSP_SCHEDULE_DELAY,
    maxExportBatchSize: Math.min(read.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, maxQueueSize),
    exportTimeoutMillis: read.OTEL_BSP_EXPORT_TIMEOUT,
  };
}

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

/** Read once: `performance.timeOrigin` is a getter that calls into Node each time. */
const TIME_ORIGIN = performance.timeOrigin;

/** Epoch microseconds (an integer, exact in a double) of a `performance.now()` reading. */
export function epochMicros(now: number): number {
  return Math.round((TIME_ORIGIN + now) * 1000);
}

/**
 * How ended spans become an OTLP/HTTP request body (otlp-proto-spans.ts, otlp-json-spans.ts): the
 * body's start, then each span written into the batch's buffer, then the body sealed.
 */
export interface SpanEncoding {
  readonly contentType: string;
  /** The body up to its first span: the resource and the scope. */
  readonly head: Buffer;
  /** At most the bytes `write` and `seal` take for this span; called just before `write`. */
  bound(span: RecordedSpan): number;
  /** Writes the span at `at`, with at least `bound(span)` bytes of room; returns where it ends. */
  write(span: RecordedSpan, chunk: Buffer, at: number, first: boolean): number;
  /** Finishes a body written from 0 to `end`; returns its length. */
  seal(chunk: Buffer, end: number): number;
}

/** Where ended spans go: a recorder, or several (`fanOutSpans`). */
export interface SpanSink {
  ended(span: RecordedSpan): void;
  /** Exports what is held, then stops. */
  shutdown(): Promise<void>;
}

/** One encoded batch's way out: `done` once the body is no longer read (sent, or given up). */
export interface BatchExport {
  export(body: Buffer, done: () => void): void;
  shutdown(): Promise<void>;
}

/**
 * `OTEL_TRACES_EXPORTER=console`: each batch, encoded as OTLP JSON, written as one line (the
 * OpenTelemetry collector's file exporter writes the same), to standard output unless told.
 */
export function consoleBatchExport(write: (line: string) => void = (line) => void process.stdout.write(line)): BatchExport {
  return {
    export(body, done) {
      write(`${body.toString('utf8')}\n`);
      done();
    },
    shutdown: async () => {},
  };
}

/** Every span to each of `sinks` (`OTEL_TRACES_EXPORTER=otlp,console`): each encodes and sends it its own way. */
export function fanOutSpans(sinks: SpanSink[]): SpanSink {
  return {
    ended(span) {
      for (const sink of sinks) sink.ended(span);
    },
    shutdown: async () => void (await Promise.all(sinks.map((sink) => sink.shutdown()))),
  };
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
  // The fields below are read by the encodings once the span has ended, and changed only by its methods.
  readonly start = performance.now();
  /** Attributes set after the start, as key, value, key, value. */
  readonly later: Array<string | AttributeValue> = [];
  /** Events as reading, name, attributes. */
  readonly events: Array<number | string | Attributes> = [];
  status: { code: number; message?: string } | null = null;
  finish = 0;
  private ended = false;
  /** Sources of attributes read when the span is encoded, as source, reader, source, reader. */
  private sources: unknown[] | null = null;

  constructor(
    private readonly recorder: SpanSink | null,
    readonly traceId: string,
    readonly parentSpanId: string | undefined,
    public name: string,
    readonly kind: number,
    readonly attributes: Attributes,
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

  /**
   * Reads the attributes `attributesFrom` deferred onto `later`, once, by the first recorder to
   * encode the span (a second finds them there).
   */
  readSources(): void {
    const sources = this.sources;
    if (!sources) return;
    this.sources = null;
    for (let i = 0; i < sources.length; i += 2) (sources[i + 1] as AttributeReader<unknown>)(sources[i], this.later);
  }
}

/** A batch is written into a buffer of this size (a larger one for a span that needs it). */
const CHUNK_BYTES = 1 << 20;
/** Buffers kept for reuse once their export is done: one being written, one or two in flight. */
const SPARE_CHUNKS = 3;

/**
 * Ended spans, batched as `OTEL_BSP_*` says and exported over OTLP/HTTP (protobuf, or JSON when
 * `OTEL_EXPORTER_OTLP_PROTOCOL` says so) by the maintained delegate. Each span is
 * written into its batch's buffer as it is encoded (`ended`), outside the JavaScript heap: spans waiting up to
 * the schedule delay for their export would otherwise be strings that outlive young-generation
 * collections, which the collector copies and promotes. The buffer holds the whole request body
 * (the resource's head, then the spans), so the delegate sends it as it is, and it is reused
 * once its export is done: a busy process allocating a fresh megabyte for every batch reports
 * that much external memory to V8 each time, which brings major collections forward.
 */
export class SpanRecorder implements SpanSink {
  private readonly spare: Buffer[] = [];
  private chunk: Buffer | null = null;
  private used = 0;
  private count = 0;
  /** Batches written and not yet sent. */
  private readonly batches: Array<{ body: Buffer; chunk: Buffer; count: number }> = [];
  /** Spans encoded and waiting for their export to start (the SDK's queue holds the same). */
  private queued = 0;
  /** Ended spans not yet encoded. */
  private readonly pending: RecordedSpan[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** The exports under way, one batch at a time. */
  private sending: Promise<void> = Promise.resolve();
  private readonly delegate: BatchExport;

  private readonly encoding: SpanEncoding;

  /**
   * `encode` makes the body's encoding from the resource's attributes and the scope's name;
   * bodies go to the OTLP/HTTP endpoint `OTEL_EXPORTER_OTLP_*` names, or to `out`, in batches as
   * `batch` says (`OTEL_BSP_*` unless told).
   */
  constructor(
    resource: Resource,
    scopeName: string,
    encode: (resource: Attributes, scopeName: string) => SpanEncoding,
    out?: BatchExport,
    readonly batch: BatchSettings = batchSettings(),
  ) {
    this.encoding = encode(resource.attributes, scopeName);
    this.delegate = out ?? createOtlpHttpExportDelegate(convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', { 'Content-Type': this.encoding.contentType }), {
      serializeRequest: (body: Buffer) => body,
      deserializeResponse: () => ({}),
    });
  }

  /**
   * Takes an ended span. Spans are encoded a few dozen at a time (`ENCODE_EVERY`, or when the
   * batch is flushed): one span's encoding, run once between two requests' other work, finds
   * its code and data out of the processor's caches and costs about twice what it costs in a
   * loop (bench/results/2026-11-27-issue-36-traces.md). Under load the spans wait a few
   * milliseconds, less than the time between two young-generation collections; a quiet process's
   * wait until the batch's schedule delay, when collections are few.
   */
  ended(span: RecordedSpan): void {
    if (this.queued + this.pending.length >= this.batch.maxQueueSize) return;
    this.pending.push(span);
    if (this.pending.length >= ENCODE_EVERY) this.writePending();
    else this.flushSoon(this.batch.scheduledDelayMillis);
  }

  private writePending(): void {
    const spans = this.pending;
    for (let i = 0; i < spans.length; i++) this.write(spans[i]!);
    spans.length = 0;
  }

  private write(span: RecordedSpan): void {
    if (this.queued >= this.batch.maxQueueSize) return;
    span.readSources();
    const room = this.encoding.bound(span);
    if (this.chunk && this.used + room > this.chunk.length) this.seal();
    if (!this.chunk) this.open(room);
    this.used = this.encoding.write(span, this.chunk!, this.used, this.count === 0);
    this.count += 1;
    this.queued += 1;
    if (this.count >= this.batch.maxExportBatchSize) {
      this.seal();
      this.flushSoon(0);
    } else {
      this.flushSoon(this.batch.scheduledDelayMillis);
    }
  }

  /** Starts a batch in a spare buffer, or a new one (larger when one span needs it). */
  private open(room: number): void {
    const head = this.encoding.head;
    const size = head.length + room;
    this.chunk = size <= CHUNK_BYTES ? (this.spare.pop() ?? Buffer.allocUnsafe(CHUNK_BYTES)) : Buffer.allocUnsafe(size);
    this.used = head.copy(this.chunk, 0);
  }

  /** Closes the batch being written: its body is the buffer up to where the encoding ends it. */
  private seal(): void {
    const chunk = this.chunk;
    if (!chunk || this.count === 0) return;
    this.batches.push({ body: chunk.subarray(0, this.encoding.seal(chunk, this.used)), chunk, count: this.count });
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

  /**
   * One batch at a time, as the SDK's processor exports: the next starts when this one is over, or
   * once `OTEL_BSP_EXPORT_TIMEOUT` has passed (the late one goes on in the delegate).
   */
  private async sendQueued(): Promise<void> {
    for (let batch = this.batches.shift(); batch; batch = this.batches.shift()) {
      const { body, chunk, count } = batch;
      this.queued -= count;
      await new Promise<void>((resolve) => {
        const late = setTimeout(resolve, this.batch.exportTimeoutMillis);
        late.unref();
        // The delegate calls back once the export is over, retries included: the body is no longer read.
        this.delegate.export(body, () => {
          clearTimeout(late);
          this.recycle(chunk);
          resolve();
        });
      });
    }
  }

  async shutdown(): Promise<void> {
    await this.flush();
    await this.delegate.shutdown();
  }
}
