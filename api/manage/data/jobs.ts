import type Router from '@koa/router';
import { and, asc, eq, inArray, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import type { Database } from '../../../core/db/client';
import { unixOrNull, unixSeconds } from '../../../core/clock';
import { JOB_STATUSES, jobEvents, jobs, webhookDeliveries } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { jobStatusFilter, type JobRow } from '../../../core/jobs/job-store';
import { displayUrl } from '../../../core/net/display-url';
import { afterCursor, keysetOrder, listEnvelope, pageOf, readPage, timestampKey, type Keyset } from '../../../core/paging';
import { workflowIds } from '../../../workflows/definitions';
import type { GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';
import type { ManagementServices } from '../services';

/**
 * Jobs as an operator reads them (issue 25): `GET /jobs` and `GET /jobs/{id}` with the job's
 * timeline and its workflow, scope `analytics:read`. The organization's jobs of every key (the
 * gateway's `/v1/jobs` shows a key its own). Data operations, not resources: no version. Never
 * an output link: those are for the key that made the job.
 */
const SCOPE = 'analytics:read';
const PAGE_DEFAULT = 50;
const NEWEST_FIRST: Keyset = { key: jobs.createdAt, id: jobs.id, order: 'desc', type: 'timestamptz' };

const jobSchema = z.object({
  id: z.string(),
  object: z.literal('job'),
  type: z.string(),
  status: z.enum(JOB_STATUSES),
  key_id: z.string(),
  project_id: z.string(),
  model: z.string(),
  route: z.string().nullable(),
  provider: z.string().nullable(),
  connection: z.string().nullable(),
  progress: z.number(),
  created_at: z.number().int(),
  started_at: z.number().int().nullable(),
  completed_at: z.number().int().nullable(),
  usage: z.object({ seconds: z.number(), cost: z.number().nullable() }).nullable(),
  error: z.object({ message: z.string(), type: z.string(), code: z.string().nullable() }).nullable(),
}).meta({ id: 'ManagedJob' });

const timelineSchema = z.array(z.object({
  at: z.number().int().meta({ description: 'Unix seconds.' }),
  event: z.string().meta({ description: '`created`, `started`, `succeeded`, `failed`, `canceled`, `output_expires`, `webhook`.' }),
  detail: z.string(),
}));

const jobDetailSchema = jobSchema.extend({
  status_checks: z.number().int(),
  timeline: timelineSchema,
  workflow: z.object({ id: z.string(), url: z.string().nullable().meta({ description: 'Its page in the Temporal UI: only for the operator\'s own organization (GW_OPERATOR_ORG_ID) when GW_TEMPORAL_UI_URL is set; null for every other.' }) }),
}).meta({ id: 'ManagedJobDetail' });

function presentJob(row: JobRow): z.infer<typeof jobSchema> {
  return {
    id: row.id, object: 'job', type: row.type, status: row.status, key_id: row.keyId, project_id: row.projectId, model: row.model, route: row.route,
    provider: row.provider, connection: row.connectionId, progress: row.progress, created_at: unixSeconds(row.createdAt), started_at: unixOrNull(row.startedAt),
    completed_at: unixOrNull(row.completedAt), usage: row.status === 'succeeded' && row.usage ? { seconds: row.usage.seconds, cost: row.usage.cost } : null,
    error: row.status === 'failed' ? row.error : null,
  };
}

export function manageJobRoutes(router: Router<GatewayState>, deps: { db: Database; manage: ManagementServices }): void {
  router.get('/jobs', async (ctx) => {
    const principal = authorize(ctx, SCOPE);
    const statuses = jobStatusFilter(ctx.query.status);
    const page = readPage(ctx.query, PAGE_DEFAULT);
    const where: Array<SQL | undefined> = [
      eq(jobs.orgId, principal.orgId),
      principal.projectIds ? inArray(jobs.projectId, principal.projectIds.length ? principal.projectIds : ['']) : undefined,
      statuses.length ? inArray(jobs.status, statuses) : undefined,
      afterCursor(NEWEST_FIRST, page.after),
    ];
    const rows = await deps.db.select({ row: jobs, at: timestampKey(jobs.createdAt) }).from(jobs).where(and(...where)).orderBy(...keysetOrder(NEWEST_FIRST)).limit(page.limit + 1);
    ctx.body = pageOf(rows, page.limit, (r) => ({ at: r.at, id: r.row.id }), (r) => presentJob(r.row));
  });

  router.get('/jobs/:id', async (ctx) => {
    const principal = authorize(ctx, SCOPE);
    const id = ctx.params.id!;
    const [row] = id.length > 64 ? [] : await deps.db.select().from(jobs).where(and(eq(jobs.orgId, principal.orgId), eq(jobs.id, id)));
    if (!row || (principal.projectIds && !principal.projectIds.includes(row.projectId))) throw new GatewayError('resource_not_found', `No job \`${id}\`.`);
    const [events, deliveries] = await Promise.all([
      deps.db.select().from(jobEvents).where(eq(jobEvents.jobId, row.id)),
      deps.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.jobId, row.id)).orderBy(asc(webhookDeliveries.createdAt)),
    ]);
    const timeline: z.infer<typeof timelineSchema> = [{ at: unixSeconds(row.createdAt), event: 'created', detail: `${row.type} on ${row.model}` }];
    if (row.startedAt) timeline.push({ at: unixOrNull(row.startedAt)!, event: 'started', detail: `accepted by ${row.provider ?? '?'} (${row.connectionId ?? '?'}, ${row.route ?? 'primary'})` });
    for (const e of events) timeline.push({ at: unixSeconds(e.createdAt), event: e.type.replace(/^job\./, ''), detail: row.error && e.type === 'job.failed' ? `${row.error.type}: ${row.error.message}` : e.type });
    if (row.completedAt && events.length === 0) timeline.push({ at: unixSeconds(row.completedAt), event: row.status, detail: row.status });
    for (const d of deliveries) timeline.push({ at: unixSeconds(d.updatedAt), event: 'webhook', detail: `${d.eventType} to ${displayUrl(d.url)}: ${d.status} after ${d.attempts} attempt(s)${d.lastResponseStatus ? `, last answer ${d.lastResponseStatus}` : ''}` });
    if (row.expiresAt) timeline.push({ at: unixSeconds(row.expiresAt), event: 'output_expires', detail: 'the output link stops working' });
    timeline.sort((a, b) => a.at - b.at);
    const workflowId = workflowIds.videoJob(row.id);
    ctx.body = { ...presentJob(row), status_checks: row.statusChecks, timeline, workflow: { id: workflowId, url: deps.manage.workflowUrl(principal.orgId, workflowId) } };
  });
}

export function manageJobPaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
  return {
    '/jobs': {
      get: {
        tags: ['jobs'], operationId: 'listJobs',
        summary: `The organization's asynchronous jobs, newest first, with their status. Scope \`${SCOPE}\`.`,
        requestParams: { query: z.object({ status: z.enum(JOB_STATUSES).optional(), limit: z.number().int().min(1).max(100).optional(), after: z.string().optional() }) },
        responses: { '200': json(listEnvelope(jobSchema), 'A page of jobs.'), ...errors },
      },
    },
    '/jobs/{id}': {
      get: {
        tags: ['jobs'], operationId: 'getJob',
        summary: `One job with its timeline (created, started, its terminal event, webhook deliveries, output expiry) and its workflow. Scope \`${SCOPE}\`.`,
        requestParams: { path: z.object({ id: z.string() }) },
        responses: { '200': json(jobDetailSchema, 'The job.'), ...errors },
      },
    },
  };
}
