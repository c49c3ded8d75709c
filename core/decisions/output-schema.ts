import type { ValidateFunction } from 'ajv';
import { compiledWithinBounds, createSafeAjv, schemaTooLarge } from '../json-schema/safe-ajv';
import { PatternBudgetExceeded, withinPatternBudget } from '../patterns/user-pattern';

/**
 * A decision policy's `output_schema` (issue 24), compiled with ajv (JSON Schema draft-07, the
 * dialect structured-output APIs accept). A policy's schema is compiled at create and patch, so
 * an invalid one is refused there, and again by the gateway the first time a version is called
 * (once per version and process, then cached). Patterns past the bounds (issue 52,
 * core/patterns/user-pattern.ts) are refused before anything is compiled, at a write and at a
 * call alike, so neither ever compiles more than the bounds allow.
 */

/** At most this much schema text: it is sent with every call. */
export const MAX_OUTPUT_SCHEMA_BYTES = 64 * 1024;

export type OutputSchemaCheck = { ok: true; validate: ValidateFunction } | { ok: false; reason: string };

/** Compiles a schema for an object; the reason says what is wrong otherwise. */
export function compileOutputSchema(schema: unknown): OutputSchemaCheck {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return { ok: false, reason: 'expected a JSON Schema object' };
  if ((schema as Record<string, unknown>).type !== 'object') return { ok: false, reason: 'the schema must describe an object (`"type": "object"`)' };
  if (JSON.stringify(schema).length > MAX_OUTPUT_SCHEMA_BYTES) return { ok: false, reason: `at most ${MAX_OUTPUT_SCHEMA_BYTES} bytes` };
  // An `$async` schema compiles to a validator answering a promise, which would pass anything.
  if (JSON.stringify(schema).includes('"$async"')) return { ok: false, reason: '`$async` schemas are not supported' };
  const tooLarge = schemaTooLarge(schema);
  if (tooLarge) return { ok: false, reason: tooLarge };
  try {
    // An instance per schema: ajv keeps every schema it compiled (and refuses a repeated `$id`),
    // so one shared instance would grow with every policy version ever compiled. Patterns run
    // on RE2 (core/json-schema/safe-ajv.ts): a policy's schema runs on the API's event loop.
    const validate = createSafeAjv().compile(schema);
    if (!compiledWithinBounds(validate)) return { ok: false, reason: 'the schema compiles to too much code' };
    return { ok: true, validate };
  } catch (err) {
    return { ok: false, reason: (err as Error).message.slice(0, 300) };
  }
}

/**
 * What is wrong with a value against a compiled schema, in one line; null when it is valid. A
 * value whose patterns would cost more than their budget to check (core/patterns/user-pattern.ts)
 * is not valid.
 */
export function schemaViolation(validate: ValidateFunction, value: unknown): string | null {
  try {
    if (withinPatternBudget(() => validate(value))) return null;
  } catch (err) {
    if (err instanceof PatternBudgetExceeded) return err.message;
    throw err;
  }
  const [first] = validate.errors ?? [];
  return first ? `${first.instancePath || '(root)'} ${first.message ?? 'is invalid'}` : 'is invalid';
}
