import { sql, type SQL } from 'drizzle-orm';
import { parseInstant } from './instant';
import { z } from 'zod';
import type { Database } from '../db/client';
import type { Plan } from '../db/schema';
import { GatewayError } from '../errors';
import { historyStart } from './history';

/**
 * Usage reads (issue 13; `GET /v1/usage`, `GET /manage/v1/usage`): buckets of request, token,
 * cost and unpriced counts summed from the hourly rollup (`usage_hourly`), never from raw
 * request-log rows. One parser and one query serve both endpoints; they differ only in who may
 * see what (`UsageScope`) and in whether CSV is offered.
 */

export const USAGE_BUCKETS = ['hour', 'day'] as const;
export type UsageBucket = (typeof USAGE_BUCKETS)[number];
export const USAGE_GROUP_FIELDS = ['model', 'provider', 'key', 'project', 'user_id', 'cost_center'] as const;
/** A plain field, or `tags.<key>`. */
export type UsageGroup = string;

/** Which rows a reader may count: its whole organization, or one key lineage's keys. */
export type UsageScope = { orgId: string; lineageId?: string; projectIds?: string[] | null };

export type UsageParams = { bucket: UsageBucket; from: Date | null; to: Date | null; groupBy: UsageGroup[]; format: 'json' | 'csv' };

export type UsageCounters = { requests: number; prompt_tokens: number; completion_tokens: number; total_tokens: number; cost: number; unpriced_requests: number };
export type UsageRow = { bucket_start: number; bucket_end: number; group?: Record<string, string | null> } & UsageCounters;
export type UsageReport = {
  object: 'list';
  bucket: UsageBucket;
  /** The span counted, in Unix seconds, after the plan's history window cut `from`. */
  from: number;
  to: number;
  group_by: UsageGroup[];
  data: UsageRow[];
  totals: UsageCounters;
  has_more: false;
  /** The list envelope's field: never more pages, so always empty. */
  next_cursor: '';
};

/** More rows than this in one answer is refused: narrow the span or the grouping. */
export const MAX_USAGE_ROWS = 10_000;
const TAG_KEY = /^[A-Za-z0-9_.:-]{1,64}$/;
const invalid = (message: string) => new GatewayError('invalid_request', message);

type Query = Record<string, string | string[] | undefined>;

function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) {
    if (value.length > 1) throw invalid(`Invalid \`${name}\`: give it once.`);
    return value[0];
  }
  return value;
}

const bucketSchema = z.enum(USAGE_BUCKETS);

/** The query string of either endpoint; every problem is a 400 naming the parameter. */
export function parseUsageParams(query: Query): UsageParams {
  const bucketText = single(query, 'bucket') ?? 'day';
  const bucket = bucketSchema.safeParse(bucketText);
  if (!bucket.success) throw invalid('Invalid `bucket`: expected `hour` or `day`.');
  const fromText = single(query, 'from');
  const toText = single(query, 'to');
  const from = fromText === undefined ? null : parseInstant('from', fromText);
  const to = toText === undefined ? null : parseInstant('to', toText);
  if (from && to && from.getTime() >= to.getTime()) throw invalid('Invalid `from`: it must be before `to`.');
  const formatText = single(query, 'format') ?? 'json';
  if (formatText !== 'json' && formatText !== 'csv') throw invalid('Invalid `format`: expected `json` or `csv`.');
  const raw = query.group_by;
  const groupBy: UsageGroup[] = [];
  for (const item of (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).flatMap((v) => v.split(','))) {
    const field = item.trim();
    const known = (USAGE_GROUP_FIELDS as readonly string[]).includes(field) || (field.startsWith('tags.') && TAG_KEY.test(field.slice(5)));
    if (!known) throw invalid(`Invalid \`group_by\`: \`${field}\` is not one of ${USAGE_GROUP_FIELDS.join(', ')} or tags.<key>.`);
    if (!groupBy.includes(field)) groupBy.push(field);
  }
  return { bucket: bucket.data, from, to, groupBy, format: formatText };
}

/** The rollup column (or tag lookup) a grouping reads. */
function groupColumn(field: UsageGroup): SQL {
  switch (field) {
    case 'model': return sql`u.model`;
    case 'provider': return sql`u.provider`;
    case 'key': return sql`u.key_id`;
    case 'project': return sql`u.project_id`;
    case 'user_id': return sql`u.user_id`;
    case 'cost_center': return sql`u.cost_center_id`;
    default: return sql`u.tags ->> ${field.slice(5)}`;
  }
}

const HOUR_MS = 3_600_000;

/**
 * The span counted: every rollup hour that overlaps [`from`, `to`) and starts inside the plan's
 * history window (an hour that began before the window is not counted at all, so nothing older
 * than the window is). `to` defaults to now, `from` to the start of the window.
 */
export function usageSpan(params: Pick<UsageParams, 'from' | 'to'>, plan: Plan, now: Date): { from: Date; to: Date } {
  const windowStart = new Date(Math.ceil(historyStart(plan, now).getTime() / HOUR_MS) * HOUR_MS);
  const requestedFrom = params.from ? new Date(Math.floor(params.from.getTime() / HOUR_MS) * HOUR_MS) : windowStart;
  const from = requestedFrom < windowStart ? windowStart : requestedFrom;
  const to = params.to ?? now;
  return { from, to };
}

const num = (v: unknown) => Number(v ?? 0);

/** The aggregation both endpoints answer: sparse buckets (only those with requests), oldest first. */
export async function usageReport(db: Database, scope: UsageScope, params: UsageParams, plan: Plan, now: Date): Promise<UsageReport> {
  const span = usageSpan(params, plan, now);
  const bucketMs = params.bucket === 'hour' ? HOUR_MS : 24 * HOUR_MS;
  const report: UsageReport = {
    object: 'list', bucket: params.bucket, from: Math.floor(span.from.getTime() / 1000), to: Math.floor(span.to.getTime() / 1000),
    group_by: params.groupBy, data: [], totals: { requests: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost: 0, unpriced_requests: 0 }, has_more: false, next_cursor: '',
  };
  if (span.from >= span.to) return report;

  const bucketStart = params.bucket === 'hour' ? sql`u.hour` : sql`date_trunc('day', u.hour at time zone 'UTC') at time zone 'UTC'`;
  const groups = params.groupBy.map((field, i) => sql`${groupColumn(field)} as ${sql.identifier(`g${i}`)}`);
  const conditions: SQL[] = [sql`u.org_id = ${scope.orgId}`, sql`u.hour >= ${span.from.toISOString()}::timestamptz`, sql`u.hour < ${span.to.toISOString()}::timestamptz`];
  if (scope.lineageId !== undefined) {
    conditions.push(sql`u.key_id in (select k.id from gateway_keys k where k.org_id = ${scope.orgId} and k.lineage_id = ${scope.lineageId})`);
  }
  // A project-restricted management token counts its projects only.
  if (scope.projectIds) {
    conditions.push(scope.projectIds.length === 0 ? sql`false` : sql`u.project_id in (${sql.join(scope.projectIds.map((id) => sql`${id}`), sql`, `)})`);
  }
  const positions = sql.raw(Array.from({ length: params.groupBy.length + 1 }, (_, i) => String(i + 1)).join(', '));
  // By cost center, buckets come from the rollup split by center; a split request counts in
  // each of its centers, so the totals' counts are read from the plain rollup.
  const byCostCenter = params.groupBy.includes('cost_center');
  const table = sql.raw(byCostCenter ? 'usage_hourly_cost_centers' : 'usage_hourly');

  const result = await db.execute<Record<string, unknown>>(sql`
    select ${bucketStart} as bucket_start${groups.length ? sql`, ${sql.join(groups, sql`, `)}` : sql``},
      sum(u.requests)::text as requests, sum(u.prompt_tokens)::text as prompt_tokens,
      sum(u.completion_tokens)::text as completion_tokens, sum(u.total_tokens)::text as total_tokens,
      sum(u.cost)::text as cost, sum(u.unpriced_requests)::text as unpriced_requests
    from ${table} u
    where ${sql.join(conditions, sql` and `)}
    group by ${positions}
    order by ${positions}
    limit ${MAX_USAGE_ROWS + 1}`);
  if (result.rows.length > MAX_USAGE_ROWS) {
    throw invalid(`More than ${MAX_USAGE_ROWS} buckets: narrow \`from\`/\`to\`, use \`bucket=day\` or fewer \`group_by\` fields.`);
  }

  const totals = report.totals;
  let cost = 0;
  for (const row of result.rows) {
    const start = new Date(row.bucket_start as string | Date).getTime();
    const entry: UsageRow = {
      bucket_start: Math.floor(start / 1000),
      bucket_end: Math.floor((start + bucketMs) / 1000),
      ...(params.groupBy.length > 0 && {
        group: Object.fromEntries(params.groupBy.map((field, i) => {
          const value = row[`g${i}`] as string | null;
          // Absent attributions are '' in the rollup; a missing tag is null from `->>`.
          return [field, value === '' && !field.startsWith('tags.') ? null : value];
        })),
      }),
      requests: num(row.requests),
      prompt_tokens: num(row.prompt_tokens),
      completion_tokens: num(row.completion_tokens),
      total_tokens: num(row.total_tokens),
      cost: num(row.cost),
      unpriced_requests: num(row.unpriced_requests),
    };
    report.data.push(entry);
    totals.requests += entry.requests;
    totals.prompt_tokens += entry.prompt_tokens;
    totals.completion_tokens += entry.completion_tokens;
    totals.total_tokens += entry.total_tokens;
    totals.unpriced_requests += entry.unpriced_requests;
    cost += entry.cost;
  }
  // Bucket costs are exact decimals; their float sum is rounded back to a nanodollar.
  totals.cost = Math.round(cost * 1e9) / 1e9;
  if (byCostCenter) {
    const [counts] = (await db.execute<Record<string, unknown>>(sql`
      select coalesce(sum(u.requests), 0)::text as requests, coalesce(sum(u.prompt_tokens), 0)::text as prompt_tokens,
        coalesce(sum(u.completion_tokens), 0)::text as completion_tokens, coalesce(sum(u.total_tokens), 0)::text as total_tokens,
        coalesce(sum(u.unpriced_requests), 0)::text as unpriced_requests
      from usage_hourly u where ${sql.join(conditions, sql` and `)}`)).rows;
    for (const counter of ['requests', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'unpriced_requests'] as const) totals[counter] = num(counts?.[counter]);
  }
  return report;
}

/** One CSV cell (RFC 4180): quoted when it holds a comma, quote or line break. */
function cell(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * The same report as CSV: a header row, then one line a bucket with the JSON answer's figures.
 * Bucket bounds are ISO 8601 UTC (spreadsheets read them); a null group value is an empty cell.
 */
export function usageCsv(report: UsageReport): string {
  const counters = ['requests', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'cost', 'unpriced_requests'] as const;
  const header = ['bucket_start', 'bucket_end', ...report.group_by, ...counters];
  const iso = (unix: number) => new Date(unix * 1000).toISOString();
  const lines = report.data.map((row) => [
    iso(row.bucket_start), iso(row.bucket_end), ...report.group_by.map((field) => row.group?.[field] ?? null), ...counters.map((c) => row[c]),
  ].map(cell).join(','));
  return [header.map(cell).join(','), ...lines].join('\r\n') + '\r\n';
}
