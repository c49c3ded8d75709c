import type { Attributes, AttributeValue } from '@opentelemetry/api';
import { keptByKey, keptByKeyAndValue } from './kept-encodings';
import { epochMicros, type RecordedSpan, type SpanEncoding } from './span-recorder';

/**
 * OTLP/HTTP JSON for the gateway's recorded spans (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`):
 * each span is one string, written into the batch's buffer. The protobuf encoding
 * (otlp-proto-spans.ts) is the default.
 */

/**
 * Epoch nanoseconds as OTLP JSON writes them (a decimal string; a double cannot hold them), from a
 * `performance.now()` reading: to the microsecond, which a double holds exactly.
 */
function nanosOf(now: number): string {
  const micros = epochMicros(now);
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

/**
 * The same text as one flat string. Text built by concatenation is a tree of pieces, which every
 * span it is written into walks again; a string kept for reuse is made flat once.
 */
function flat(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** Each attribute key's encoded start. */
const keyPrefix = keptByKey((key) => flat(`{"key":${JSON.stringify(key)},"value":`));

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

/** Repeated string attributes, each kept as one flat string. */
const keptString = keptByKeyAndValue((key, value) => flat(`${keyPrefix(key)}{"stringValue":${JSON.stringify(value)}}}`));

function encodeAttribute(key: string, value: AttributeValue): string {
  return (typeof value === 'string' ? keptString(key, value) : undefined) ?? `${keyPrefix(key)}${encodeValue(value)}}`;
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

function encodeSpan(span: RecordedSpan): string {
  let attributes = encodeAttributes(span.attributes);
  const later = span.later;
  for (let i = 0; i < later.length; i += 2) {
    const encoded = encodeAttribute(later[i] as string, later[i + 1] as AttributeValue);
    attributes = attributes ? `${attributes},${encoded}` : encoded;
  }
  let events = '';
  const list = span.events;
  for (let i = 0; i < list.length; i += 3) {
    const event = `{"timeUnixNano":"${nanosOf(list[i] as number)}","name":${JSON.stringify(list[i + 1])},"attributes":[${encodeAttributes(list[i + 2] as Attributes)}]}`;
    events = events ? `${events},${event}` : event;
  }
  const status = span.status ? `,"status":{"code":${span.status.code}${span.status.message ? `,"message":${JSON.stringify(span.status.message)}` : ''}}` : '';
  return `{"traceId":"${span.traceId}","spanId":"${span.spanId}"${span.parentSpanId ? `,"parentSpanId":"${span.parentSpanId}"` : ''},"name":${JSON.stringify(span.name)},"kind":${span.kind},` +
    `"startTimeUnixNano":"${nanosOf(span.start)}","endTimeUnixNano":"${nanosOf(span.finish)}","attributes":[${attributes}]${events ? `,"events":[${events}]` : ''}${status}}`;
}

const TAIL = Buffer.from(']}]}]}');

/** OTLP JSON: the body is the resource's head, the spans separated by commas, and the closing brackets. */
export function otlpJsonSpans(resource: Attributes, scopeName: string): SpanEncoding {
  /** The span measured last, written next: `bound` encodes it, `write` copies it. */
  let text = '';
  return {
    contentType: 'application/json',
    head: Buffer.from(`{"resourceSpans":[{"resource":{"attributes":[${encodeAttributes(resource)}]},"scopeSpans":[{"scope":{"name":${JSON.stringify(scopeName)}},"spans":[`),
    bound(span) {
      text = encodeSpan(span);
      // UTF-8 takes at most three bytes per UTF-16 unit; one for the separating comma.
      return text.length * 3 + 1 + TAIL.length;
    },
    write(_span, chunk, at, first) {
      if (!first) chunk[at++] = 0x2c;
      at += chunk.write(text, at);
      text = '';
      return at;
    },
    seal(chunk, end) {
      return end + TAIL.copy(chunk, end);
    },
  };
}
