/**
 * Text Postgres can store. A `text` or `jsonb` value refuses a NUL character, and JSON with a
 * lone UTF-16 surrogate (`"\ud800"`, which JSON.stringify writes for one) is refused on input, so
 * one such character in one row used to make Postgres refuse a whole multi-row batch.
 */

// eslint-disable-next-line no-control-regex -- NUL is the character looked for
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');

/** Whether Postgres stores this text as it is. */
export function isStorableText(text: string): boolean {
  return !UNSTORABLE.test(text);
}

/** Where in a JSON value (keys included) the first text Postgres cannot store is, as a path; null when there is none. */
export function unstorablePath(value: unknown, path: string[] = []): string[] | null {
  if (typeof value === 'string') return isStorableText(value) ? null : path;
  if (value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorablePath(value[i], [...path, String(i)]);
      if (found) return found;
    }
    return null;
  }
  for (const [key, v] of Object.entries(value)) {
    if (!isStorableText(key)) return [...path, key.replace(UNSTORABLE_ALL, '?')];
    const found = unstorablePath(v, [...path, key]);
    if (found) return found;
  }
  return null;
}

/** A copy of a row whose every text is one Postgres stores: NUL and lone surrogates become U+FFFD. */
export function storableCopy(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(UNSTORABLE_ALL, '\uFFFD');
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  if (Array.isArray(value)) return value.map(storableCopy);
  const copy: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) copy[storableCopy(key) as string] = storableCopy(v);
  return copy;
}
