/**
 * Encodings kept for reuse by both OTLP span encodings (otlp-json-spans.ts, otlp-proto-spans.ts):
 * attribute keys are a small fixed set, and most string values repeat from request to request
 * (the operation, the provider, the model, the path, the cache outcome).
 */

/** At most this many keys are kept; past it, keys are encoded afresh each time. */
const KEYS_KEPT = 1000;
/** A key whose values keep changing (a request id) fills this many places, then its values are encoded afresh. */
const VALUES_KEPT_PER_KEY = 64;
/** Longer values are not kept. */
const LONGEST_KEPT_VALUE = 128;

/** Each key's encoding, made once per key. */
export function keptByKey<T>(encode: (key: string) => T): (key: string) => T {
  const kept = new Map<string, T>();
  return (key) => {
    let encoded = kept.get(key);
    if (encoded === undefined) {
      encoded = encode(key);
      if (kept.size < KEYS_KEPT) kept.set(key, encoded);
    }
    return encoded;
  };
}

/**
 * Each string attribute's encoding by key, then by value, made once while there is room:
 * undefined for a value too long to keep or past its key's places (the caller encodes it then).
 */
export function keptByKeyAndValue<T>(encode: (key: string, value: string) => T): (key: string, value: string) => T | undefined {
  const byKey = new Map<string, Map<string, T>>();
  return (key, value) => {
    if (value.length > LONGEST_KEPT_VALUE) return undefined;
    let values = byKey.get(key);
    if (values === undefined) {
      values = new Map();
      if (byKey.size < KEYS_KEPT) byKey.set(key, values);
    }
    let encoded = values.get(value);
    if (encoded === undefined && values.size < VALUES_KEPT_PER_KEY) values.set(value, (encoded = encode(key, value)));
    return encoded;
  };
}
