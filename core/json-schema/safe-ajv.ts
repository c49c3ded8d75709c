import Ajv, { type Options } from 'ajv';
import type { RegExpEngine, SchemaValidateFunction } from 'ajv/dist/types';
import canonicalize from 'canonicalize';
import { patternCompiler } from '../patterns/user-pattern';
import { schemaPatternsTooLarge } from './schema-patterns';

/**
 * ajv for schemas a tenant (or a tenant's tool server) wrote, which the API runs on its one
 * event loop. ajv's defaults let one schema stall every tenant: `pattern` and
 * `patternProperties` run on JavaScript's backtracking RegExp (`^(a+)+$` against fifty `a`
 * and a `!` never finishes), `uniqueItems` compares every pair of a long array (deeply), and
 * `inlineRefs` copies a referenced subschema into every use. Here patterns run on RE2 (linear
 * time; a pattern RE2 cannot run, such as a back-reference, is refused at compile) within
 * bounds on their size, count and total program (schema-patterns.ts checks them first), uniqueness
 * is one canonical text per item in a set (linear in the array's size), references stay
 * functions, and a schema's depth and size are bounded before it is compiled.
 */

/** At most this deep (nested objects and arrays of the schema itself). */
export const MAX_SCHEMA_DEPTH = 32;
/** At most this many objects in the schema: compiled code grows with them. */
export const MAX_SCHEMA_NODES = 2_000;
/**
 * An array checked for `uniqueItems` is refused past this many items: the check is linear, but
 * an answer of a million small objects would still take the event loop for a second.
 */
export const MAX_UNIQUE_ITEMS = 2_000;
/** Generated validator code at most this long. */
export const MAX_COMPILED_CHARS = 2_000_000;

/**
 * RE2 through `re2js` (already loaded for guardrail patterns), loaded on the first pattern,
 * each pattern and the schema's patterns together within bounds (core/patterns/user-pattern.ts).
 * Its flags argument is ajv's `u`: RE2 matches Unicode text always. One per ajv instance, so
 * the bounds are one schema's.
 */
function linearRegExp(): RegExpEngine {
  return Object.assign(patternCompiler(), { code: 'linearRegExp' });
}

/**
 * `uniqueItems` in linear time: each item's canonical JSON (RFC 8785: sorted keys, one number
 * form, so exactly the items ajv's deep equality calls equal) in a set. ajv's own keyword
 * compares every pair, deeply: a thousand objects took 50 ms of the event loop.
 */
const uniqueItemsLinear: SchemaValidateFunction = function uniqueItems(schema: unknown, data: unknown): boolean {
  if (schema !== true || !Array.isArray(data)) return true;
  if (data.length > MAX_UNIQUE_ITEMS) {
    uniqueItemsLinear.errors = [{ keyword: 'uniqueItems', message: `must NOT have more than ${MAX_UNIQUE_ITEMS} items to be checked for duplicates`, params: { limit: MAX_UNIQUE_ITEMS } }];
    return false;
  }
  const seen = new Map<string, number>();
  for (let i = 0; i < data.length; i++) {
    const text = canonicalize(data[i]) ?? 'undefined';
    const j = seen.get(text);
    if (j !== undefined) {
      uniqueItemsLinear.errors = [{ keyword: 'uniqueItems', message: `must NOT have duplicate items (items ${j} and ${i} are identical)`, params: { i: j, j: i } }];
      return false;
    }
    seen.set(text, i);
  }
  return true;
};

/** An ajv instance whose patterns run on RE2, whose uniqueItems is linear, and whose references are not inlined. */
export function createSafeAjv(options: Options = {}): Ajv {
  // `logger: false`: an unknown keyword or format in a tenant's schema is no line in our log.
  const ajv = new Ajv({ strict: false, allErrors: false, logger: false, ...options, inlineRefs: false, code: { ...options.code, regExp: linearRegExp() } });
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword({ keyword: 'uniqueItems', type: 'array', schemaType: 'boolean', errors: true, validate: uniqueItemsLinear });
  return ajv;
}

/**
 * What is wrong with a schema's size, depth or patterns (schema-patterns.ts), or null when it is
 * within bounds; no pattern is compiled to find out.
 */
export function schemaTooLarge(schema: unknown): string | null {
  let nodes = 0;
  let deepest = 0;
  const walk = (value: unknown, depth: number): void => {
    if (value === null || typeof value !== 'object' || depth > MAX_SCHEMA_DEPTH || nodes > MAX_SCHEMA_NODES) return;
    nodes++;
    deepest = Math.max(deepest, depth);
    for (const v of Array.isArray(value) ? value : Object.values(value)) walk(v, depth + 1);
  };
  walk(schema, 0);
  if (deepest >= MAX_SCHEMA_DEPTH) return `the schema nests ${MAX_SCHEMA_DEPTH} levels or deeper`;
  if (nodes > MAX_SCHEMA_NODES) return `the schema has more than ${MAX_SCHEMA_NODES} objects and arrays`;
  return schemaPatternsTooLarge(schema);
}

/** Whether a compiled validator's generated code is within bounds. */
export function compiledWithinBounds(validate: (...args: never[]) => unknown): boolean {
  return validate.toString().length <= MAX_COMPILED_CHARS;
}
