import { sql, type AnyColumn, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import { GatewayError } from './errors';

/**
 * The one paging mechanism (spec 4.4 list envelope): keyset pages over `(sort key, id)`, newest
 * first unless a type has a natural order. A cursor is opaque to clients: base64url of the last
 * row's sort key and id, so a page is stable under concurrent inserts (new rows sort before the
 * cursor and never shift a page the client has not read yet).
 */
export type Cursor = { at: string; id: string };

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify([cursor.at, cursor.id])).toString('base64url');
}

/**
 * `next_cursor` on a page with nothing after it (spec 2.1 types the field `string`): the empty
 * string, never null. `has_more` is the signal to stop; a client that passes the empty string
 * back anyway gets the first page (`readCursor`), not a 400.
 */
export const NO_NEXT_CURSOR = '';

/** The cursor a client sent back as `after`; anything else is 400 naming the parameter. */
export function decodeCursor(value: string, param = 'after'): Cursor {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
    if (Array.isArray(parsed) && parsed.length === 2 && typeof parsed[0] === 'string' && typeof parsed[1] === 'string') return { at: parsed[0], id: parsed[1] };
  } catch {
    // fall through to the refusal
  }
  throw new GatewayError('invalid_request', `Invalid \`${param}\`: pass the \`next_cursor\` of the previous page.`);
}

/**
 * A cursor parameter as sent (`after`, the audit log's `cursor`): absent or empty means the
 * first page, anything else must be a `next_cursor` this module made (400 naming `param`).
 */
export function readCursor(value: string | undefined, param = 'after'): Cursor | null {
  return value === undefined || value === NO_NEXT_CURSOR ? null : decodeCursor(value, param);
}

/** A cursor query parameter's schema: empty is allowed and means the first page. */
export function cursorParam() {
  return z.string().max(512).optional();
}

/** `limit` (1 to `max`, default `fallback`) and `after` from a query string. */
export function pageQuery(fallback = DEFAULT_PAGE_SIZE, max = MAX_PAGE_SIZE) {
  return z.object({
    limit: z.coerce.number().int().min(1).max(max).default(fallback),
    after: cursorParam(),
  });
}

/** The list envelope's schema (spec 4.4), for validation and the OpenAPI document. */
export function listEnvelope<T extends z.ZodType>(item: T) {
  return z.object({
    object: z.literal('list'),
    data: z.array(item),
    has_more: z.boolean(),
    next_cursor: z.string().meta({ description: 'Pass it back as `after` for the next page. Always a string: empty when `has_more` is false (and passing the empty string back reads the first page).' }),
  });
}

export type Page<T> = { object: 'list'; data: T[]; has_more: boolean; next_cursor: string };

/** The list envelope of an answer that is never paged (every entry on one page). */
export function singlePage<T>(data: T[]): Page<T> {
  return { object: 'list', data, has_more: false, next_cursor: NO_NEXT_CURSOR };
}

/**
 * The list envelope from `limit + 1` rows fetched in page order: `has_more` is exact, and
 * `next_cursor` is a cursor on every page that has more, the empty string on the last.
 */
export function pageOf<Row, T>(rows: Row[], limit: number, cursorOf: (row: Row) => Cursor, present: (row: Row) => T): Page<T> {
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  return { object: 'list', data: page.map(present), has_more: hasMore, next_cursor: hasMore ? encodeCursor(cursorOf(page.at(-1)!)) : NO_NEXT_CURSOR };
}

/** What a list endpoint was asked for: `limit` rows after `after` (null: the first page). */
export type PageRequest = { limit: number; after: Cursor | null };

/**
 * `limit` and `after` read from a query string; anything else in it is left to the caller.
 * A bad value is 400 `invalid_request_error` naming the parameter.
 */
export function readPage(query: Record<string, unknown>, fallback = DEFAULT_PAGE_SIZE, max = MAX_PAGE_SIZE): PageRequest {
  const result = pageQuery(fallback, max).safeParse({ limit: query.limit, after: query.after });
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const param = String(issue.path[0] ?? 'limit');
    const rule = param === 'limit' ? `it must be a whole number from 1 to ${max}` : 'pass the `next_cursor` of the previous page';
    throw new GatewayError('invalid_request', `Invalid \`${param}\`: ${rule}.`);
  }
  return { limit: result.data.limit, after: readCursor(result.data.after) };
}

/**
 * The order of a keyset page: `key` then `id`, both in `order`. `key` is a timestamp column
 * (the cursor carries it to the microsecond, see `timestampKey`), any text expression, or the
 * id column itself for ids that sort by creation time.
 * Rows sharing a key are told apart by `id`, so the order is total and a page never skips or
 * repeats a row. A cursor whose row was deleted since still marks a place in that order: the
 * next page starts after where the row was.
 */
export type Keyset = { key: AnyColumn | SQL; id: AnyColumn | SQL; order: 'asc' | 'desc'; type: 'timestamptz' | 'text' };

/** A timestamp as a cursor carries it: UTC to the microsecond, so it compares exactly as stored. */
export function timestampKey(column: AnyColumn | SQL): SQL<string> {
  return sql<string>`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

const TIMESTAMP_KEY = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,6})?Z$/;

/** The rows after the cursor in the keyset's order (undefined on the first page). */
export function afterCursor(keyset: Keyset, after: Cursor | null): SQL | undefined {
  if (!after) return undefined;
  const op = keyset.order === 'desc' ? sql`<` : sql`>`;
  if (keyset.type === 'timestamptz') {
    // A cursor that decodes but names no real instant is as invalid as one that does not decode.
    const whole = TIMESTAMP_KEY.exec(after.at)?.[1];
    const instant = whole ? Date.parse(`${whole}Z`) : Number.NaN;
    if (Number.isNaN(instant) || new Date(instant).toISOString().slice(0, 19) !== whole) throw new GatewayError('invalid_request', 'Invalid `after`: pass the `next_cursor` of the previous page.');
    return sql`(${keyset.key}, ${keyset.id}) ${op} (${after.at}::timestamptz, ${after.id})`;
  }
  // A list ordered by its id alone (ids that sort by creation time) compares the id alone, so an index on it serves the page.
  if (keyset.key === keyset.id) return sql`${keyset.id} ${op} ${after.id}`;
  return sql`(${keyset.key}, ${keyset.id}) ${op} (${after.at}::text, ${after.id}::text)`;
}

/** ORDER BY for the keyset's page order. */
export function keysetOrder(keyset: Keyset): SQL[] {
  const direction = keyset.order === 'desc' ? sql`desc` : sql`asc`;
  return keyset.key === keyset.id ? [sql`${keyset.id} ${direction}`] : [sql`${keyset.key} ${direction}`, sql`${keyset.id} ${direction}`];
}
