import { z } from 'zod';
import { ERROR_CATALOG, GatewayError, type ErrorKind } from '../core/errors';
import { isStorableText } from '../core/db/storable-text';

/** A code a field's refusal carries: a 400 `invalid_request_error` entry of the catalogue. */
export type FieldErrorCode = ErrorKind;

/**
 * Fields whose refusal the spec names a code for (`credential` of a tool-gateway server is
 * `invalid_mcp_credential`, a provider id is `unknown_provider`, ...). The code is declared once,
 * on the field's schema (`withErrorCode`), and every schema that embeds that field (create,
 * patch through `.partial()`, an action) answers with it: no route maps codes by hand.
 */
const fieldCodes = z.registry<{ code: FieldErrorCode }>();

/**
 * Marks a field so that any validation problem at or under it is answered with `code`. Call it
 * last: `.describe()`, `.meta()` and the like return a new schema the mark does not carry.
 */
export function withErrorCode<S extends z.ZodType>(schema: S, code: FieldErrorCode): S {
  if (ERROR_CATALOG[code].status !== 400) throw new Error(`\`${code}\` is not a 400 code; a field's problem is a bad request`);
  fieldCodes.add(schema, { code });
  return schema;
}

type Def = {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
  in?: z.ZodType;
  getter?: () => z.ZodType;
};

const defOf = (schema: z.ZodType) => schema._zod.def as unknown as Def;

/** The schema a wrapper (optional, nullable, default, a transform's pipe, lazy ...) wraps. */
function wrapped(schema: z.ZodType): z.ZodType | undefined {
  const def = defOf(schema);
  return def.innerType ?? (def.type === 'pipe' ? def.in : undefined) ?? (def.type === 'lazy' ? def.getter?.() : undefined);
}

/** The mark on a schema or on any schema it wraps. */
function markOn(schema: z.ZodType): FieldErrorCode | undefined {
  for (let s: z.ZodType | undefined = schema, i = 0; s && i < 16; s = wrapped(s), i++) {
    const mark = fieldCodes.get(s);
    if (mark) return mark.code;
  }
  return undefined;
}

/** The schema of `key` under an object, array or record schema (through its wrappers). */
function child(schema: z.ZodType, key: PropertyKey): z.ZodType | undefined {
  let base = schema;
  for (let next = wrapped(base), i = 0; next && i < 16; next = wrapped(base), i++) base = next;
  const def = defOf(base);
  if (def.type === 'object' && typeof key === 'string') return def.shape?.[key];
  if (def.type === 'array' && typeof key === 'number') return def.element;
  if (def.type === 'record') return def.valueType;
  return undefined;
}

/** The value at `path` of the input, or undefined where the path leaves it. */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/**
 * The code marked on the outermost field along `path` whose value was given. A required field
 * left out is a plain bad request: a missing `kind` is not an unknown provider.
 */
function codeAt(root: z.ZodType, input: unknown, path: readonly PropertyKey[]): FieldErrorCode | undefined {
  let schema: z.ZodType | undefined = root;
  for (let depth = 0; schema; depth++) {
    const mark = markOn(schema);
    if (mark) return valueAt(input, path.slice(0, depth)) === undefined ? undefined : mark;
    if (depth === path.length) return undefined;
    schema = child(schema, path[depth]!);
  }
  return undefined;
}

/**
 * Validates input with a zod schema; the first problem becomes a 400 naming the field, with the
 * field's own code where it has one (`withErrorCode`), else `invalid_request_error` without one.
 */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, where = 'body'): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.length > 0 ? issue.path.join('.') : where;
  throw new GatewayError(codeAt(schema, input, issue.path) ?? 'invalid_request', `Invalid \`${field}\`: ${issue.message}`);
}

/** Why a text with a NUL or an unpaired surrogate is refused: Postgres cannot store it (core/db/storable-text.ts). */
export const UNSTORABLE_TEXT = 'must not contain NUL or unpaired surrogate characters';

/** A model name as every endpoint takes it: it is logged, rolled up and filtered on, so it must be storable. */
export const modelName = z.string().min(1).max(256).refine(isStorableText, UNSTORABLE_TEXT);
