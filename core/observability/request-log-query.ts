import { and, eq, getTableColumns, gte, inArray, lt, sql, type SQL } from 'drizzle-orm';
import { parseInstant } from './instant';
import type { Executor } from '../db/client';
import { gatewayKeys, requestLogs, type Plan } from '../db/schema';
import { GatewayError } from '../errors';
import { afterCursor, decodeCursor, keysetOrder, pageOf, timestampKey, type Cursor, type Keyset, type Page } from '../paging';
import { PROVIDER_KINDS } from '../providers/kinds';
import { historyStart } from './history';

/**
 * The request log's reads (spec 4.3 `GET /v1/requests`, 4.4 `GET /requests`, `GET /traces/{id}`):
 * query parameters to a drizzle `where`, shared by the gateway and the management API. Every
 * query names the organization and a `created_at` lower bound (the plan's history window, or a
 * later `from`), so a time-partitioned `request_logs` prunes to the partitions a read can see.
 */

/** Spec 8 "management request log page": at most 100; the gateway's default is 20 (issue 13). */
export const REQUEST_LOG_PAGE_DEFAULT = 20;
export const REQUEST_LOG_PAGE_MAX = 100;
/** A trace is read oldest first, a page at a time, 100 by default and at most. */
export const TRACE_PAGE_DEFAULT = 100;

export type StatusFilter = { kind: 'exact'; status: number } | { kind: 'class'; from: number };

export type RequestLogFilters = {
  model?: string;
  status?: StatusFilter;
  from?: Date;
  to?: Date;
  userId?: string;
  sessionId?: string;
  /** Every pair must be among the request's `metadata.tags`. */
  tags: Record<string, string>;
  route?: string;
  provider?: string;
  keyId?: string;
  /** A cost center id the request was charged to, or `unallocated` (issue 23). */
  costCenter?: string;
  /** The W3C trace id (32 lowercase hex digits) the request ran in. */
  traceId?: string;
};

/** Who is reading: the organization, its plan (the history window), and any narrowing. */
export type RequestLogScope = {
  orgId: string;
  plan: Plan;
  now: Date;
  /** A `scoped` gateway key: only these keys' requests (its lineage). */
  keyIds?: string[];
  /** A project-restricted management token: only these projects' requests. */
  projectIds?: string[] | null;
};

type QueryValue = string | string[] | undefined;
export type QueryParams = Record<string, QueryValue>;

const FILTER_PARAMS = ['model', 'status', 'from', 'to', 'user_id', 'session_id', 'route', 'provider', 'key_id', 'cost_center', 'trace_id'] as const;
const PAGE_PARAMS = ['limit', 'after'] as const;
const TAG_PREFIX = 'tags.';
const TAG_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
/** The `cost_center` filter's value for requests with an unallocated part (no rule, or an archived center's share). */
export const UNALLOCATED_FILTER = 'unallocated';

/** Requests charged (wholly or partly) to a center, or with an unallocated part. */
function costCenterWhere(costCenter: string): SQL {
  if (costCenter === UNALLOCATED_FILTER) {
    return sql`(${requestLogs.costAllocation} is null or ${requestLogs.costAllocation} @> '[{"cost_center_id": null}]'::jsonb)`;
  }
  return sql`${requestLogs.costAllocation} @> ${JSON.stringify([{ cost_center_id: costCenter }])}::jsonb`;
}

const invalid = (message: string) => new GatewayError('invalid_request', message);

function single(query: QueryParams, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw invalid(`Invalid \`${name}\`: give it once.`);
  if (value.length === 0) throw invalid(`Invalid \`${name}\`: it is empty.`);
  return value;
}

function bounded(name: string, value: string | undefined, max: number): string | undefined {
  if (value !== undefined && value.length > max) throw invalid(`Invalid \`${name}\`: at most ${max} characters.`);
  return value;
}

/** `429` or a class such as `4xx`. */
export function parseStatus(text: string): StatusFilter {
  const exact = /^([1-5]\d\d)$/.exec(text);
  if (exact) return { kind: 'exact', status: Number(exact[1]) };
  const cls = /^([1-5])xx$/i.exec(text);
  if (cls) return { kind: 'class', from: Number(cls[1]) * 100 };
  throw invalid(`Invalid \`status\`: \`${text}\` is neither an HTTP status (such as 429) nor a class (such as 4xx).`);
}

export type RequestLogQuery = { filters: RequestLogFilters; limit: number; after: Cursor | null };

/**
 * The filters and page of a request-log read. An unknown parameter, a repeated single one, or a
 * value that cannot match anything well-formed is 400 `invalid_request_error` naming it.
 */
export function parseRequestLogQuery(query: QueryParams, options: { defaultLimit?: number; allowed?: readonly string[] } = {}): RequestLogQuery {
  const filtersAllowed = options.allowed === undefined;
  const allowed = new Set<string>(options.allowed ?? [...FILTER_PARAMS, ...PAGE_PARAMS]);
  const tags: Record<string, string> = {};
  for (const name of Object.keys(query)) {
    if (filtersAllowed && name.startsWith(TAG_PREFIX)) {
      const tag = name.slice(TAG_PREFIX.length);
      if (!TAG_NAME.test(tag)) throw invalid(`Invalid \`${name}\`: tag names are 1 to 64 letters, digits or . _ : -.`);
      tags[tag] = bounded(name, single(query, name), 256)!;
    } else if (!allowed.has(name)) {
      throw invalid(`Unknown query parameter \`${name}\`.`);
    }
  }

  const status = single(query, 'status');
  const fromText = single(query, 'from');
  const toText = single(query, 'to');
  const from = fromText === undefined ? undefined : parseInstant('from', fromText);
  const to = toText === undefined ? undefined : parseInstant('to', toText);
  if (from && to && from.getTime() >= to.getTime()) throw invalid('Invalid `from`: it must be before `to`.');
  const provider = single(query, 'provider');
  if (provider !== undefined && !(PROVIDER_KINDS as readonly string[]).includes(provider)) {
    throw new GatewayError('unknown_provider', `Invalid \`provider\`: \`${provider}\` is not a provider id.`);
  }
  const keyId = single(query, 'key_id');
  if (keyId !== undefined && !/^key_[0-9a-z]{1,60}$/.test(keyId)) throw invalid(`Invalid \`key_id\`: \`${keyId}\` is not a gateway key id.`);

  const costCenter = single(query, 'cost_center');
  if (costCenter !== undefined && costCenter !== UNALLOCATED_FILTER && !/^ccen_[0-9a-z]{1,60}$/.test(costCenter)) {
    throw invalid(`Invalid \`cost_center\`: \`${costCenter}\` is neither a cost center id nor \`${UNALLOCATED_FILTER}\`.`);
  }

  const limitText = single(query, 'limit');
  const limit = limitText === undefined ? options.defaultLimit ?? REQUEST_LOG_PAGE_DEFAULT : Number(limitText);
  if (!/^\d+$/.test(limitText ?? '1') || !Number.isInteger(limit) || limit < 1 || limit > REQUEST_LOG_PAGE_MAX) {
    throw invalid(`Invalid \`limit\`: a whole number from 1 to ${REQUEST_LOG_PAGE_MAX}.`);
  }
  // An empty `after` (the last page's `next_cursor` passed back) reads the first page.
  const afterText = query.after === '' ? undefined : bounded('after', single(query, 'after'), 512);
  const after = afterText === undefined ? null : checkedCursor(afterText);

  return {
    filters: {
      model: bounded('model', single(query, 'model'), 256),
      status: status === undefined ? undefined : parseStatus(status),
      from,
      to,
      userId: bounded('user_id', single(query, 'user_id'), 256),
      sessionId: bounded('session_id', single(query, 'session_id'), 256),
      tags,
      route: bounded('route', single(query, 'route'), 64),
      provider,
      keyId,
      costCenter,
      traceId: traceIdFilter(single(query, 'trace_id')),
    },
    limit,
    after,
  };
}

/** A trace id as W3C writes it; upper-case hex is read as the same id. */
function traceIdFilter(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const id = value.toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(id)) throw invalid('Invalid `trace_id`: a W3C trace id, 32 hexadecimal digits.');
  return id;
}

/** A cursor this module made (paging checks its time when the query is built); anything else is 400. */
function checkedCursor(text: string): Cursor {
  const cursor = decodeCursor(text);
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(cursor.id)) {
    throw invalid('Invalid `after`: pass the `next_cursor` of the previous page.');
  }
  return cursor;
}

/** The ids of every key of one lineage (a key and the keys rotated from or into it). */
export async function lineageKeyIds(db: Executor, orgId: string, lineageId: string): Promise<string[]> {
  const rows = await db.select({ id: gatewayKeys.id }).from(gatewayKeys).where(and(eq(gatewayKeys.orgId, orgId), eq(gatewayKeys.lineageId, lineageId)));
  return rows.map((r) => r.id);
}

/** The earliest `created_at` the reader may see: the plan's window, or a later `from`. */
export function visibleSince(scope: RequestLogScope, from?: Date): Date {
  const start = historyStart(scope.plan, scope.now);
  return from && from > start ? from : start;
}

/** Organization, history window and the reader's narrowing: part of every request-log query. */
export function scopeWhere(scope: RequestLogScope, from?: Date): SQL {
  return and(
    eq(requestLogs.orgId, scope.orgId),
    gte(requestLogs.createdAt, visibleSince(scope, from)),
    scope.keyIds ? inArray(requestLogs.keyId, scope.keyIds) : undefined,
    scope.projectIds ? inArray(requestLogs.projectId, scope.projectIds) : undefined,
  )!;
}

/** The scope and every filter as one condition. */
export function requestLogWhere(scope: RequestLogScope, f: RequestLogFilters): SQL {
  const status = f.status?.kind === 'exact'
    ? eq(requestLogs.status, f.status.status)
    : f.status ? and(gte(requestLogs.status, f.status.from), lt(requestLogs.status, f.status.from + 100)) : undefined;
  return and(
    scopeWhere(scope, f.from),
    f.to ? lt(requestLogs.createdAt, f.to) : undefined,
    f.model !== undefined ? eq(requestLogs.requestedModel, f.model) : undefined,
    status,
    f.userId !== undefined ? eq(requestLogs.userId, f.userId) : undefined,
    f.sessionId !== undefined ? eq(requestLogs.sessionId, f.sessionId) : undefined,
    Object.keys(f.tags).length > 0 ? sql`${requestLogs.tags} @> ${JSON.stringify(f.tags)}::jsonb` : undefined,
    f.route !== undefined ? eq(requestLogs.routeSlug, f.route) : undefined,
    f.provider !== undefined ? eq(requestLogs.provider, f.provider) : undefined,
    f.keyId !== undefined ? eq(requestLogs.keyId, f.keyId) : undefined,
    f.costCenter !== undefined ? costCenterWhere(f.costCenter) : undefined,
    f.traceId !== undefined ? eq(requestLogs.traceId, f.traceId) : undefined,
  )!;
}

/** Newest first by `(created_at, id)`: the cursor carries `created_at` to the microsecond. */
const NEWEST_FIRST: Keyset = { key: requestLogs.createdAt, id: requestLogs.id, order: 'desc', type: 'timestamptz' };
/** A trace reads oldest first. */
const OLDEST_FIRST: Keyset = { ...NEWEST_FIRST, order: 'asc' };
const cursorAt = timestampKey(requestLogs.createdAt);

const { requestBody: _requestBody, responseBody: _responseBody, ...metadataColumns } = getTableColumns(requestLogs);

/** A request-log row without the prompt and the answer. */
export type RequestLogMetadata = Omit<typeof requestLogs.$inferSelect, 'requestBody' | 'responseBody'>;
export type RequestLogRow = typeof requestLogs.$inferSelect;

/** A page of the request log, newest first, metadata only (bodies are never read for a list). */
export async function listRequestLogs<T>(db: Executor, scope: RequestLogScope, query: RequestLogQuery, present: (row: RequestLogMetadata) => T): Promise<Page<T>> {
  const rows = await db.select({ ...metadataColumns, cursorAt }).from(requestLogs)
    .where(and(requestLogWhere(scope, query.filters), afterCursor(NEWEST_FIRST, query.after)))
    .orderBy(...keysetOrder(NEWEST_FIRST))
    .limit(query.limit + 1);
  return pageOf(rows, query.limit, (r) => ({ at: r.cursorAt, id: r.id }), present);
}

/** One request the reader may see (within the history window), with its bodies; null otherwise. */
export async function findRequestLog(db: Executor, scope: RequestLogScope, id: string): Promise<RequestLogRow | null> {
  if (id.length > 64) return null;
  const [row] = await db.select().from(requestLogs).where(and(scopeWhere(scope), eq(requestLogs.id, id))).limit(1);
  return row ?? null;
}

export type TraceTotals = {
  requestCount: number;
  estimatedCost: number;
  unpricedRequestCount: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  firstAt: Date | null;
  lastAt: Date | null;
};

/** The whole run's totals: every visible request of one `metadata.session_id`. */
export async function traceTotals(db: Executor, scope: RequestLogScope, sessionId: string): Promise<TraceTotals> {
  const tokens = (name: string) => sql<string>`coalesce(sum((${requestLogs.usage}->>${name})::numeric), 0)::text`;
  const [row] = await db.select({
    count: sql<number>`count(*)::int`,
    cost: sql<string>`coalesce(sum(${requestLogs.cost}), 0)::text`,
    unpriced: sql<number>`(count(*) filter (where ${requestLogs.cost} is null and ${requestLogs.usage} is not null))::int`,
    prompt: tokens('prompt_tokens'),
    completion: tokens('completion_tokens'),
    total: tokens('total_tokens'),
    firstAt: sql<number | null>`extract(epoch from min(${requestLogs.createdAt}))::float8`,
    lastAt: sql<number | null>`extract(epoch from max(${requestLogs.createdAt}))::float8`,
  }).from(requestLogs).where(and(scopeWhere(scope), eq(requestLogs.sessionId, sessionId)));
  return {
    requestCount: row?.count ?? 0,
    estimatedCost: Number(row?.cost ?? 0),
    unpricedRequestCount: row?.unpriced ?? 0,
    promptTokens: Number(row?.prompt ?? 0),
    completionTokens: Number(row?.completion ?? 0),
    totalTokens: Number(row?.total ?? 0),
    firstAt: row?.firstAt == null ? null : new Date(Number(row.firstAt) * 1000),
    lastAt: row?.lastAt == null ? null : new Date(Number(row.lastAt) * 1000),
  };
}

/** A page of one run's requests, oldest first. */
export async function traceRequests<T>(db: Executor, scope: RequestLogScope, sessionId: string, page: { limit: number; after: Cursor | null }, present: (row: RequestLogMetadata) => T): Promise<Page<T>> {
  const rows = await db.select({ ...metadataColumns, cursorAt }).from(requestLogs)
    .where(and(scopeWhere(scope), eq(requestLogs.sessionId, sessionId), afterCursor(OLDEST_FIRST, page.after)))
    .orderBy(...keysetOrder(OLDEST_FIRST))
    .limit(page.limit + 1);
  return pageOf(rows, page.limit, (r) => ({ at: r.cursorAt, id: r.id }), present);
}

/** `limit` and `after` of a trace read (no filters). */
export function parseTraceQuery(query: QueryParams): { limit: number; after: Cursor | null } {
  const { limit, after } = parseRequestLogQuery(query, { defaultLimit: TRACE_PAGE_DEFAULT, allowed: PAGE_PARAMS });
  return { limit, after };
}
