import type { Attributes, AttributeValue } from '@opentelemetry/api';
import { keptByKey, keptByKeyAndValue } from './kept-encodings';
import { epochMicros, type RecordedSpan, type SpanEncoding } from './span-recorder';

/**
 * OTLP/HTTP protobuf for the gateway's recorded spans: the protocol `OTEL_EXPORTER_OTLP_PROTOCOL`
 * defaults to, written field by field into the batch's buffer (about half the bytes of the JSON
 * and no intermediate strings). The messages are opentelemetry-proto's `ExportTraceServiceRequest`
 * with one `ResourceSpans` and one `ScopeSpans`; the field numbers are in `TAG` below.
 *
 * Lengths are varints written before what they measure, which is not known until written. A
 * batch's and a span's lengths are kept as a fixed number of bytes and filled in after, as a
 * varint padded with continuation bits: valid protobuf that every decoder reads (protobuf's
 * varints need not be minimal). Every other length (attributes, strings, events, status) gets one
 * byte, enough for most, and what it measures is moved along when it needs more (`endLength`).
 */

/** Field tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited). */
const TAG = {
  resourceSpans: 0x0a, // ExportTraceServiceRequest.resource_spans = 1
  resource: 0x0a, // ResourceSpans.resource = 1
  scopeSpans: 0x12, // ResourceSpans.scope_spans = 2
  resourceAttribute: 0x0a, // Resource.attributes = 1
  scope: 0x0a, // ScopeSpans.scope = 1
  span: 0x12, // ScopeSpans.spans = 2
  scopeName: 0x0a, // InstrumentationScope.name = 1
  traceId: 0x0a, // Span.trace_id = 1
  spanId: 0x12, // Span.span_id = 2
  parentSpanId: 0x22, // Span.parent_span_id = 4
  name: 0x2a, // Span.name = 5
  kind: 0x30, // Span.kind = 6
  start: 0x39, // Span.start_time_unix_nano = 7 (fixed64)
  end: 0x41, // Span.end_time_unix_nano = 8 (fixed64)
  spanAttribute: 0x4a, // Span.attributes = 9
  event: 0x5a, // Span.events = 11
  status: 0x7a, // Span.status = 15
  eventTime: 0x09, // Event.time_unix_nano = 1 (fixed64)
  eventName: 0x12, // Event.name = 2
  eventAttribute: 0x1a, // Event.attributes = 3
  statusMessage: 0x12, // Status.message = 2
  statusCode: 0x18, // Status.code = 3
  key: 0x0a, // KeyValue.key = 1
  value: 0x12, // KeyValue.value = 2
  stringValue: 0x0a, // AnyValue.string_value = 1
  boolValue: 0x10, // AnyValue.bool_value = 2
  intValue: 0x18, // AnyValue.int_value = 3
  doubleValue: 0x21, // AnyValue.double_value = 4 (fixed64)
  arrayValue: 0x2a, // AnyValue.array_value = 5
  arrayItem: 0x0a, // ArrayValue.values = 1
} as const;

function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : Math.ceil(Math.log2(n + 1) / 7);
}

/** A non-negative integer (below 2^53) as a varint. */
function writeVarint(buf: Buffer, at: number, n: number): number {
  if (n < 0x80) {
    buf[at] = n;
    return at + 1;
  }
  while (n >= 0x80) {
    buf[at++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[at++] = n;
  return at;
}

/** `n` in exactly `size` bytes: a varint padded with continuation bits, for a length kept before it was known. */
function fillPadded(buf: Buffer, at: number, size: number, n: number): void {
  for (let i = 0; i < size - 1; i++) {
    buf[at + i] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[at + size - 1] = n;
}

/** Bytes kept for a length that at most `bound` bytes will fill. */
function paddedSize(bound: number): number {
  return bound < 0x200000 ? 3 : 5;
}

/**
 * Ends a length-delimited field whose content was written after one byte kept for its length
 * (`lengthAt`), and returns where the field ends. Most contents here are under 128 bytes, whose
 * varint is that one byte; a longer one is moved along to make room for its varint.
 */
function endLength(buf: Buffer, lengthAt: number, end: number): number {
  const length = end - lengthAt - 1;
  if (length < 0x80) {
    buf[lengthAt] = length;
    return end;
  }
  const size = varintSize(length);
  buf.copyWithin(lengthAt + size, lengthAt + 1, end);
  writeVarint(buf, lengthAt, length);
  return end + size - 1;
}

/** A string field, written by Node after the byte kept for its length. */
function writeString(buf: Buffer, at: number, tag: number, s: string): number {
  buf[at] = tag;
  return endLength(buf, at + 1, at + 2 + buf.write(s, at + 2));
}

function copyBytes(src: Uint8Array, buf: Buffer, at: number): number {
  const n = src.length;
  if (n > 64) buf.set(src, at);
  else for (let i = 0; i < n; i++) buf[at + i] = src[i]!;
  return at + n;
}

const HEX = new Int8Array(128).fill(0);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}
/** A hex id's bytes (trace and span ids are kept as the hex that headers and rows carry). */
function writeHexId(buf: Buffer, at: number, tag: number, hex: string, bytes: number): number {
  buf[at++] = tag;
  buf[at++] = bytes;
  for (let i = 0; i < bytes; i++) buf[at + i] = (HEX[hex.charCodeAt(2 * i)]! << 4) | HEX[hex.charCodeAt(2 * i + 1)]!;
  return at + bytes;
}

const TWO_32 = 0x1_0000_0000;
/** A `performance.now()` reading as fixed64 epoch nanoseconds (to the microsecond), little-endian. */
function writeNanos(buf: Buffer, at: number, tag: number, now: number): number {
  const micros = epochMicros(now);
  const microsLow = micros % TWO_32;
  const nanosLow = microsLow * 1000; // below 2^42: exact
  const low = nanosLow % TWO_32;
  const high = ((micros - microsLow) / TWO_32) * 1000 + (nanosLow - low) / TWO_32;
  buf[at] = tag;
  buf[at + 1] = low & 0xff;
  buf[at + 2] = (low >>> 8) & 0xff;
  buf[at + 3] = (low >>> 16) & 0xff;
  buf[at + 4] = low >>> 24;
  buf[at + 5] = high & 0xff;
  buf[at + 6] = (high >>> 8) & 0xff;
  buf[at + 7] = (high >>> 16) & 0xff;
  buf[at + 8] = high >>> 24;
  return at + 9;
}

type Scalar = string | number | boolean;

/** An `AnyValue` message's fields. */
function writeAny(buf: Buffer, at: number, value: AttributeValue): number {
  switch (typeof value) {
    case 'string':
      return writeString(buf, at, TAG.stringValue, value);
    case 'boolean':
      buf[at] = TAG.boolValue;
      buf[at + 1] = value ? 1 : 0;
      return at + 2;
    case 'number':
      if (Number.isSafeInteger(value)) {
        buf[at] = TAG.intValue;
        if (value >= 0) return writeVarint(buf, at + 1, value);
        // A negative int64 is its two's complement: ten bytes.
        let word = BigInt.asUintN(64, BigInt(value));
        at += 1;
        while (word >= 0x80n) {
          buf[at++] = Number(word & 0x7fn) | 0x80;
          word >>= 7n;
        }
        buf[at] = Number(word);
        return at + 1;
      }
      buf[at] = TAG.doubleValue;
      buf.writeDoubleLE(value, at + 1);
      return at + 9;
    default: {
      buf[at] = TAG.arrayValue;
      const lengthAt = at + 1;
      at = lengthAt + 1;
      for (const item of value as ReadonlyArray<Scalar | null | undefined>) {
        if (item === null || item === undefined) continue;
        buf[at] = TAG.arrayItem;
        at = endLength(buf, at + 1, writeAny(buf, at + 2, item));
      }
      return endLength(buf, lengthAt, at);
    }
  }
}

/** Each attribute key's `KeyValue.key` field. */
const keyField = keptByKey((key) => {
  const bytes = Buffer.allocUnsafe(6 + Buffer.byteLength(key, 'utf8'));
  return Uint8Array.prototype.slice.call(bytes, 0, writeString(bytes, 0, TAG.key, key));
});

/** A `KeyValue` message after its tag: its length, its key, its value. */
function writeKeyValueBody(buf: Buffer, at: number, key: string, value: AttributeValue): number {
  const valueAt = copyBytes(keyField(key), buf, at + 1);
  buf[valueAt] = TAG.value;
  return endLength(buf, at, endLength(buf, valueAt + 1, writeAny(buf, valueAt + 2, value)));
}

/** Repeated string attributes, each kept as its `KeyValue` after the tag. */
const keptString = keptByKeyAndValue((key, value) => {
  const bytes = Buffer.allocUnsafe(keyValueBound(key, value));
  return Uint8Array.prototype.slice.call(bytes, 0, writeKeyValueBody(bytes, 0, key, value));
});

function writeKeyValue(buf: Buffer, at: number, tag: number, key: string, value: AttributeValue): number {
  buf[at] = tag;
  const kept = typeof value === 'string' ? keptString(key, value) : undefined;
  if (kept) return copyBytes(kept, buf, at + 1);
  return writeKeyValueBody(buf, at + 1, key, value);
}

function writeAttributes(buf: Buffer, at: number, tag: number, attributes: Attributes): number {
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined && value !== null) at = writeKeyValue(buf, at, tag, key, value);
  }
  return at;
}

/** At most the bytes an attribute takes: three per UTF-16 unit of text, and room for every tag and length. */
function valueBound(value: AttributeValue): number {
  switch (typeof value) {
    case 'string':
      return 6 + 3 * value.length;
    case 'boolean':
      return 2;
    case 'number':
      return 11;
    default: {
      let bound = 6;
      for (const item of value as ReadonlyArray<Scalar | null | undefined>) if (item !== null && item !== undefined) bound += 6 + valueBound(item);
      return bound;
    }
  }
}

function keyValueBound(key: string, value: AttributeValue): number {
  return 18 + 3 * key.length + valueBound(value);
}

function attributesBound(attributes: Attributes): number {
  let bound = 0;
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined && value !== null) bound += keyValueBound(key, value);
  }
  return bound;
}

function spanBound(span: RecordedSpan): number {
  let bound = 96 + 3 * span.name.length + attributesBound(span.attributes);
  const later = span.later;
  for (let i = 0; i < later.length; i += 2) bound += keyValueBound(later[i] as string, later[i + 1] as AttributeValue);
  const events = span.events;
  for (let i = 0; i < events.length; i += 3) bound += 32 + 3 * (events[i + 1] as string).length + attributesBound(events[i + 2] as Attributes);
  if (span.status) bound += 24 + 3 * (span.status.message?.length ?? 0);
  return bound;
}

function writeStatus(buf: Buffer, at: number, status: { code: number; message?: string }): number {
  buf[at] = TAG.status;
  let end = at + 2;
  if (status.message) end = writeString(buf, end, TAG.statusMessage, status.message);
  if (status.code) {
    buf[end] = TAG.statusCode;
    end = writeVarint(buf, end + 1, status.code);
  }
  return endLength(buf, at + 1, end);
}

/** One span, as `ScopeSpans.spans`: its length kept in `pad` bytes and filled in once written. */
function writeSpan(buf: Buffer, at: number, span: RecordedSpan, pad: number): number {
  buf[at] = TAG.span;
  const lengthAt = at + 1;
  const from = lengthAt + pad;
  at = writeHexId(buf, from, TAG.traceId, span.traceId, 16);
  at = writeHexId(buf, at, TAG.spanId, span.spanId, 8);
  if (span.parentSpanId) at = writeHexId(buf, at, TAG.parentSpanId, span.parentSpanId, 8);
  at = writeString(buf, at, TAG.name, span.name);
  buf[at] = TAG.kind;
  buf[at + 1] = span.kind;
  at = writeNanos(buf, at + 2, TAG.start, span.start);
  at = writeNanos(buf, at, TAG.end, span.finish);
  at = writeAttributes(buf, at, TAG.spanAttribute, span.attributes);
  const later = span.later;
  for (let i = 0; i < later.length; i += 2) at = writeKeyValue(buf, at, TAG.spanAttribute, later[i] as string, later[i + 1] as AttributeValue);
  const events = span.events;
  for (let i = 0; i < events.length; i += 3) {
    buf[at] = TAG.event;
    const eventLengthAt = at + 1;
    at = writeNanos(buf, eventLengthAt + 1, TAG.eventTime, events[i] as number);
    at = writeString(buf, at, TAG.eventName, events[i + 1] as string);
    at = endLength(buf, eventLengthAt, writeAttributes(buf, at, TAG.eventAttribute, events[i + 2] as Attributes));
  }
  if (span.status) at = writeStatus(buf, at, span.status);
  fillPadded(buf, lengthAt, pad, at - from);
  return at;
}

/** Bytes kept for each of the batch's two outer lengths (a batch is far below 2^35 bytes). */
const OUTER_PAD = 5;

/**
 * The body is `ExportTraceServiceRequest { resource_spans { resource, scope_spans { scope, spans... } } }`:
 * a head up to the first span whose two lengths are filled in when the batch is sealed.
 */
export function otlpProtoSpans(resource: Attributes, scopeName: string): SpanEncoding {
  const scratch = Buffer.alloc(64 + attributesBound(resource) + 3 * scopeName.length);
  const resourceBytes = Buffer.from(scratch.subarray(0, writeAttributes(scratch, 0, TAG.resourceAttribute, resource)));
  const scopeBytes = Buffer.from(scratch.subarray(0, writeString(scratch, 0, TAG.scopeName, scopeName)));
  const built = Buffer.alloc(2 * (1 + OUTER_PAD) + 2 * (1 + 5) + resourceBytes.length + scopeBytes.length);
  let at = 0;
  built[at++] = TAG.resourceSpans;
  at += OUTER_PAD;
  const resourceSpansFrom = at;
  built[at++] = TAG.resource;
  at = writeVarint(built, at, resourceBytes.length);
  at += resourceBytes.copy(built, at);
  built[at++] = TAG.scopeSpans;
  const scopeSpansLengthAt = at;
  at += OUTER_PAD;
  const scopeSpansFrom = at;
  built[at++] = TAG.scope;
  at = writeVarint(built, at, scopeBytes.length);
  at += scopeBytes.copy(built, at);
  const head = built.subarray(0, at);
  /** The padding of the span measured last (by `bound`), written next. */
  let pad = 3;
  return {
    contentType: 'application/x-protobuf',
    head,
    bound(span) {
      const bound = spanBound(span);
      pad = paddedSize(bound);
      return bound;
    },
    write(span, chunk, at) {
      return writeSpan(chunk, at, span, pad);
    },
    seal(chunk, end) {
      fillPadded(chunk, 1, OUTER_PAD, end - resourceSpansFrom);
      fillPadded(chunk, scopeSpansLengthAt, OUTER_PAD, end - scopeSpansFrom);
      return end;
    },
  };
}
