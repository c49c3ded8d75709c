import type Router from '@koa/router';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import type { Clock } from '../../../core/clock';
import type { Database } from '../../../core/db/client';
import { GatewayError } from '../../../core/errors';
import { HISTORY_WINDOW_DAYS } from '../../../core/observability/history';
import { MAX_USAGE_ROWS, parseUsageParams, USAGE_BUCKETS, USAGE_GROUP_FIELDS, usageReport } from '../../../core/observability/usage';
import type { GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';

/**
 * `GET /manage/v1/usage` (spec 4.4; issue 13): the aggregation of `GET /v1/usage` as JSON over
 * the token's organization (its projects only for a project-restricted token). `format=csv` is
 * refused. Scope `analytics:read`, checked before anything is read.
 */
export function manageUsageRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock }): void {
  router.get('/usage', async (ctx) => {
    const principal = authorize(ctx, 'analytics:read');
    const params = parseUsageParams(ctx.query);
    if (params.format === 'csv') throw new GatewayError('invalid_request', 'Invalid `format`: the management API answers JSON only; CSV is offered on `GET /v1/usage`.');
    ctx.body = await usageReport(deps.db, { orgId: principal.orgId, projectIds: principal.projectIds }, params, principal.plan, deps.clock.now());
  });
}

const counters = {
  requests: z.number().int().meta({ description: 'Requests logged, failed ones included.' }),
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  cost: z.number().meta({ description: 'Estimated provider cost in US dollars of the priced requests.' }),
  unpriced_requests: z.number().int().meta({ description: 'Answered (2xx) requests whose cost could not be estimated; not counted in `cost`.' }),
};

export const usageBucketSchema = z.object({
  bucket_start: z.number().int().meta({ description: 'Unix seconds (UTC hour or day start).' }),
  bucket_end: z.number().int(),
  group: z.record(z.string(), z.string().nullable()).optional().meta({ description: 'Present with `group_by`: each field\'s value, null when the request had none (`cost_center` null: unallocated).' }),
  ...counters,
}).meta({ id: 'UsageBucket' });

export const usageReportSchema = z.object({
  object: z.literal('list'),
  bucket: z.enum(USAGE_BUCKETS),
  from: z.number().int().meta({ description: 'Unix seconds: the start counted, after the plan\'s history window.' }),
  to: z.number().int(),
  group_by: z.array(z.string()),
  data: z.array(usageBucketSchema).meta({ description: 'Buckets with requests only, oldest first.' }),
  totals: z.object(counters),
  has_more: z.literal(false),
  next_cursor: z.literal('').meta({ description: 'The list envelope\'s field: one page only, so always empty.' }),
}).meta({ id: 'UsageReport' });

const windows = Object.entries(HISTORY_WINDOW_DAYS).map(([plan, days]) => `${plan} ${days}`).join(', ');

export const usageQuerySchema = z.object({
  bucket: z.enum(USAGE_BUCKETS).optional().meta({ description: 'Bucket width, UTC. Default `day`.' }),
  from: z.string().optional().meta({ description: 'ISO 8601 or Unix seconds; default the start of the plan\'s history window. Hours overlapping [from, to) count.' }),
  to: z.string().optional().meta({ description: 'ISO 8601 or Unix seconds; default now.' }),
  group_by: z.string().optional().meta({
    description: `Comma-separated: ${USAGE_GROUP_FIELDS.join(', ')}, tags.<key>. By \`cost_center\`, each request's cost is split as its cost-center rule allocated it when served; a bucket's centers and unallocated (null) add up to its whole cost, and a split request counts in each of its centers' \`requests\` (\`totals\` counts it once).`,
  }),
  format: z.literal('json').optional().meta({ description: '`csv` is refused here (400); use `GET /v1/usage`.' }),
});

export function usagePaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  return {
    '/usage': {
      get: {
        tags: ['analytics'],
        operationId: 'getUsage',
        summary: `Usage buckets (requests, tokens, estimated cost, unpriced requests) from the hourly rollup, as GET /v1/usage answers with organization access. History window by plan, in days: ${windows}. At most ${MAX_USAGE_ROWS} buckets. Scope \`analytics:read\`.`,
        requestParams: { query: usageQuerySchema },
        responses: { '200': { description: 'The usage report.', content: { 'application/json': { schema: usageReportSchema } } }, ...errors },
      },
    },
  };
}
