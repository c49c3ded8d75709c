import type Router from '@koa/router';
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import type { Clock } from '../../../core/clock';
import type { Database } from '../../../core/db/client';
import { GatewayError } from '../../../core/errors';
import { historyStart } from '../../../core/observability/history';
import type { GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';
import { parseInput } from '../../validation';
import { instantParam } from './query';

/**
 * `GET /manage/v1/request_stats` (issue 25): per UTC hour, requests, errors (status 400 and up)
 * and latency percentiles, total and added by the gateway (issue 36), read from the request log, which the usage rollup does not hold
 * (it sums; a percentile cannot be summed). At most 7 days a read, so the scan stays within
 * a week of one organization's partitions and index. Scope `analytics:read`.
 */
const HOUR_MS = 3_600_000;
export const MAX_STATS_SPAN_MS = 7 * 24 * HOUR_MS;

const statsQuery = z.object({
  from: instantParam.optional().meta({ description: 'Earliest time (inclusive); default 24 hours before `to`.' }),
  to: instantParam.optional().meta({ description: 'Latest time (exclusive); default now.' }),
});

const statsSchema = z.object({
  object: z.literal('list'),
  from: z.number().int(),
  to: z.number().int(),
  data: z.array(z.object({
    bucket_start: z.number().int().meta({ description: 'Unix seconds, the UTC hour.' }),
    requests: z.number().int(),
    errors: z.number().int().meta({ description: 'Requests answered with a status of 400 or more (the gateway\'s refusals included).' }),
    p50_latency_ms: z.number().int().nullable(),
    p95_latency_ms: z.number().int().nullable(),
    p50_added_ms: z.number().int().nullable().meta({ description: 'Time spent in the gateway rather than waiting on providers (latency less the attempts\' time), median: what `gw_request_added_duration_seconds` measures.' }),
    p95_added_ms: z.number().int().nullable(),
  })).meta({ description: 'Hours with requests only, oldest first.' }),
}).meta({ id: 'RequestStats' });

export function requestStatsRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock }): void {
  router.get('/request_stats', async (ctx) => {
    const principal = authorize(ctx, 'analytics:read');
    const now = deps.clock.now();
    const query = parseInput(statsQuery, ctx.query, 'query');
    const to = query.to ?? now;
    let from = query.from ?? new Date(to.getTime() - 24 * HOUR_MS);
    if (from >= to) throw new GatewayError('invalid_request', 'Invalid `from`: it must be before `to`.');
    if (to.getTime() - from.getTime() > MAX_STATS_SPAN_MS) throw new GatewayError('invalid_request', 'Invalid `from`: at most 7 days before `to`.');
    const earliest = historyStart(principal.plan, now);
    if (from < earliest) from = earliest;
    // A span wholly before the history window counts nothing.
    if (from > to) from = to;
    const projects = principal.projectIds ? sql` and project_id in (${principal.projectIds.length ? sql.join(principal.projectIds.map((p) => sql`${p}`), sql`, `) : sql`''`})` : sql``;
    const result = await deps.db.execute<{ hour: Date | string; requests: number; errors: number; p50: number | null; p95: number | null; added50: number | null; added95: number | null }>(sql`
      select date_trunc('hour', created_at at time zone 'UTC') at time zone 'UTC' as hour, count(*)::int as requests,
        (count(*) filter (where status >= 400))::int as errors,
        round(percentile_cont(0.5) within group (order by latency_ms))::int as p50,
        round(percentile_cont(0.95) within group (order by latency_ms))::int as p95,
        round(percentile_cont(0.5) within group (order by added))::int as added50,
        round(percentile_cont(0.95) within group (order by added))::int as added95
      from request_logs,
        lateral (select greatest(0, latency_ms - coalesce((select sum((a->>'latency_ms')::numeric) from jsonb_array_elements(attempts) a), 0)) as added) x
      where org_id = ${principal.orgId} and created_at >= ${from.toISOString()}::timestamptz and created_at < ${to.toISOString()}::timestamptz${projects}
      group by 1 order by 1`);
    ctx.body = {
      object: 'list',
      from: Math.floor(from.getTime() / 1000),
      to: Math.floor(to.getTime() / 1000),
      data: result.rows.map((r) => ({ bucket_start: Math.floor(new Date(r.hour).getTime() / 1000), requests: r.requests, errors: r.errors, p50_latency_ms: r.p50, p95_latency_ms: r.p95, p50_added_ms: r.added50, p95_added_ms: r.added95 })),
    };
  });
}

export function requestStatsPaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  return {
    '/request_stats': {
      get: {
        tags: ['analytics'],
        operationId: 'getRequestStats',
        summary: 'Per hour: requests, errors and p50/p95 latency from the request log; at most 7 days a read (default the last 24 hours). Scope `analytics:read`.',
        requestParams: { query: statsQuery },
        responses: { '200': { description: 'Hourly request statistics.', content: { 'application/json': { schema: statsSchema } } }, ...errors },
      },
    },
  };
}
