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

/** `limit` (1 to `max`, default `fallback`) and `after` from a query string. */
export function pageQuery(fallback = DEFAULT_PAGE_SIZE, max = MAX_PAGE_SIZE) {
  return z.object({
    limit: z.coerce.number().int().min(1).max(max).default(fallback),
    after: z.string().min(1).max(512).optional(),
  });
}

export type Page<T> = { object: 'list'; data: T[]; has_more: boolean; next_cursor: string | null };

/**
 * The list envelope from `limit + 1` rows fetched in page order: `has_more` is exact, and
 * `next_cursor` is a string on every page that has more.
 */
export function pageOf<Row, T>(rows: Row[], limit: number, cursorOf: (row: Row) => Cursor, present: (row: Row) => T): Page<T> {
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  return { object: 'list', data: page.map(present), has_more: hasMore, next_cursor: hasMore ? encodeCursor(cursorOf(page.at(-1)!)) : null };
}
