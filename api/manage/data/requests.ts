import type Router from '@koa/router';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import type { Clock } from '../../../core/clock';
import type { Database } from '../../../core/db/client';
import { GatewayError } from '../../../core/errors';
import { presentRequestLog, presentTrace, requestLogListSchema, requestLogSchema, traceSchema } from '../../../core/observability/request-log-present';
import {
  findRequestLog, listRequestLogs, parseRequestLogQuery, parseTraceQuery, REQUEST_LOG_PAGE_DEFAULT, REQUEST_LOG_PAGE_MAX, TRACE_PAGE_DEFAULT,
  traceRequests, traceTotals, type QueryParams, type RequestLogMetadata, type RequestLogScope,
} from '../../../core/observability/request-log-query';
import type { ManagementServices } from '../services';
import type { GatewayContext, GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';

/**
 * Read-only data operations over the request log (spec 4.4, issue 13): `GET /requests`,
 * `GET /requests/{id}`, `GET /traces/{id}`, scope `analytics:read`. Not resources: no version,
 * no If-Match. Never the prompt or the answer. History is limited to the plan's window; a
 * project-restricted token sees its projects' requests only; anything else is 404.
 */

const SCOPE = 'analytics:read';
const MAX_SESSION_ID = 256;

function scopeOf(ctx: GatewayContext, clock: Clock): RequestLogScope {
  // Scope first, before any lookup (the plan comes with the token, read fresh by managementAuth).
  const principal = authorize(ctx, SCOPE);
  return { orgId: principal.orgId, plan: principal.plan, now: clock.now(), projectIds: principal.projectIds };
}

export function requestDataRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock; manage: Pick<ManagementServices, 'traceUrl'> }): void {
  /** A row as the reader sees it, with its trace's link where the reader may have one. */
  const presenter = (scope: RequestLogScope) => (row: RequestLogMetadata) => presentRequestLog(row, deps.manage.traceUrl(scope.orgId, row.traceId));

  router.get('/requests', async (ctx) => {
    const scope = scopeOf(ctx, deps.clock);
    const query = parseRequestLogQuery(ctx.query as QueryParams);
    ctx.body = await listRequestLogs(deps.db, scope, query, presenter(scope));
  });

  router.get('/requests/:id', async (ctx) => {
    const scope = scopeOf(ctx, deps.clock);
    const id = ctx.params.id!;
    const row = await findRequestLog(deps.db, scope, id);
    if (!row) throw new GatewayError('resource_not_found', `No request \`${id}\`.`);
    ctx.body = presenter(scope)(row);
  });

  router.get('/traces/:id', async (ctx) => {
    const scope = scopeOf(ctx, deps.clock);
    const sessionId = ctx.params.id!;
    const page = parseTraceQuery(ctx.query as QueryParams);
    const notFound = new GatewayError('resource_not_found', `No trace \`${sessionId.slice(0, MAX_SESSION_ID)}\`: no request within the history window carries this \`metadata.session_id\`.`);
    if (sessionId.length > MAX_SESSION_ID) throw notFound;
    const totals = await traceTotals(deps.db, scope, sessionId);
    if (totals.requestCount === 0) throw notFound;
    ctx.body = presentTrace(sessionId, totals, await traceRequests(deps.db, scope, sessionId, page, presenter(scope)));
  });
}

const timeParam = (what: string) => z.string().optional().meta({ description: `${what}: ISO 8601 or Unix seconds. Never earlier than the plan's history window (trial 7 days, team 30, business 90).` });

export const requestLogFilterQuery = z.object({
  model: z.string().max(256).optional().meta({ description: 'The model as the client named it.' }),
  status: z.string().regex(/^([1-5]\d\d|[1-5]xx)$/i).optional().meta({ description: 'An HTTP status (`429`) or a class (`4xx`).' }),
  from: timeParam('Earliest `created_at`, inclusive'),
  to: timeParam('Latest `created_at`, exclusive'),
  user_id: z.string().max(256).optional().meta({ description: '`metadata.user_id`.' }),
  session_id: z.string().max(256).optional().meta({ description: '`metadata.session_id`.' }),
  route: z.string().max(64).optional().meta({ description: 'Route slug.' }),
  provider: z.string().optional().meta({ description: 'Provider id.' }),
  key_id: z.string().optional().meta({ description: 'Gateway key id.' }),
  cost_center: z.string().optional().meta({ description: 'A cost center id: requests charged to it, wholly or in part; `unallocated`: requests with an unallocated part.' }),
  trace_id: z.string().regex(/^[0-9a-fA-F]{32}$/).optional().meta({ description: 'A W3C trace id (`X-GW-Trace-Id`, the request log\'s `trace_id`).' }),
  limit: z.number().int().min(1).max(REQUEST_LOG_PAGE_MAX).optional().meta({ description: `Default ${REQUEST_LOG_PAGE_DEFAULT}.` }),
  after: z.string().optional().meta({ description: 'The `next_cursor` of the previous page; absent or empty reads the first page.' }),
});

/** The three operations for the OpenAPI document. */
export function requestDataPaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  const tags = ['requests'];
  const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
  const scope = `Scope \`${SCOPE}\`. Never returns prompt or answer content.`;
  return {
    '/requests': {
      get: {
        tags,
        operationId: 'listRequests',
        summary: `The request log, newest first; filters combine, and \`tags.<key>=<value>\` (repeatable) matches \`metadata.tags\`. ${scope}`,
        requestParams: { query: requestLogFilterQuery },
        responses: { '200': json(requestLogListSchema, 'A page of requests.'), ...errors },
      },
    },
    '/requests/{id}': {
      get: {
        tags,
        operationId: 'getRequest',
        summary: `One request's metadata: attempts, route, guardrail outcome, cache, cost. ${scope}`,
        requestParams: { path: z.object({ id: z.string().meta({ description: 'The request id.' }) }) },
        responses: { '200': json(requestLogSchema, 'The request.'), ...errors },
      },
    },
    '/traces/{id}': {
      get: {
        tags,
        operationId: 'getTrace',
        summary: `Every request of one run (\`metadata.session_id\`), oldest first, with the run's estimated cost and token counts. ${scope}`,
        requestParams: {
          path: z.object({ id: z.string().max(MAX_SESSION_ID).meta({ description: 'The `metadata.session_id`, URL-encoded.' }) }),
          query: z.object({
            limit: z.number().int().min(1).max(REQUEST_LOG_PAGE_MAX).optional().meta({ description: `Requests per page; default ${TRACE_PAGE_DEFAULT}.` }),
            after: z.string().optional().meta({ description: 'The `requests.next_cursor` of the previous page.' }),
          }),
        },
        responses: { '200': json(traceSchema, 'The run.'), ...errors },
      },
    },
  };
}
