import type Router from '@koa/router';
import { and, eq, gte, ilike, inArray, lt, or, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import type { Clock } from '../../../core/clock';
import type { Database } from '../../../core/db/client';
import { auditEvents } from '../../../core/db/schema';
import { historyStart } from '../../../core/observability/history';
import { afterCursor, type Cursor, cursorParam, DEFAULT_PAGE_SIZE, type Keyset, keysetOrder, listEnvelope, MAX_PAGE_SIZE, pageOf, readCursor, timestampKey } from '../../../core/paging';
import { GatewayError } from '../../../core/errors';
import type { GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';
import { parseInput } from '../../validation';
import { instantParam, unixSeconds } from './query';

/**
 * `GET /audit_events` (spec 4.4, issue 13; scope `audit:read`): the audit log, newest first,
 * paged by the one keyset module (core/paging.ts) with the cursor in `cursor`. History reaches
 * back only the plan's window (core/observability/history.ts), whatever `from` says. Audit
 * rows never hold sealed values (core/audit.ts); `detail` is still passed through a filter that
 * drops any key naming a secret, so a careless writer cannot leak one here. A project-restricted
 * token reads only rows of its projects (`project_id`, set on every write that concerns one);
 * organization-level rows are not its to read.
 */

export const auditQuery = z.object({
  q: z.string().min(1).max(200).optional().meta({ description: 'Free text, matched case-insensitively in the action, the resource type and id, and the actor token and member ids.' }),
  action: z.string().min(1).max(200).optional().meta({ description: 'Exact action, e.g. `projects.create`.' }),
  actor: z.string().min(1).max(200).optional().meta({ description: 'A management token id or a member id.' }),
  from: instantParam.optional().meta({ description: 'Earliest time (inclusive): ISO 8601 or Unix seconds. Never earlier than the plan\'s history window.' }),
  to: instantParam.optional().meta({ description: 'Latest time (exclusive): ISO 8601 or Unix seconds.' }),
  limit: z.coerce.number().int().min(1).max(MAX_PAGE_SIZE).default(DEFAULT_PAGE_SIZE),
  cursor: cursorParam().meta({ description: 'The previous page\'s `next_cursor`; absent or empty reads the first page.' }),
});

export const auditEventSchema = z.object({
  id: z.string(),
  object: z.literal('audit_event'),
  action: z.string().meta({ description: '`<resource_type>.<verb>`, e.g. `gateway_keys.rotate`.' }),
  actor_token_id: z.string().nullable(),
  actor_member_id: z.string().nullable(),
  resource_type: z.string(),
  resource_id: z.string(),
  project_id: z.string().nullable().meta({ description: 'The project the write concerns; null for an organization-level write.' }),
  before_version: z.number().int().nullable(),
  after_version: z.number().int().nullable(),
  detail: z.record(z.string(), z.unknown()).nullable().meta({ description: 'Non-secret facts of the write (changed field names, a kind); never a sealed value.' }),
  created_at: z.number().int(),
}).meta({ id: 'AuditEvent' });

export const auditEventListSchema = listEnvelope(auditEventSchema);

const SECRET_KEY = /secret|seal|credential|password|token|hash|signing/i;

/** `detail` without any key that names a secret, at any depth. */
function withoutSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSecrets);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).filter(([k]) => !SECRET_KEY.test(k)).map(([k, v]) => [k, withoutSecrets(v)]));
  }
  return value;
}

/** `%`, `_` and `\` match themselves in a LIKE pattern. */
function literalLike(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

type AuditRow = typeof auditEvents.$inferSelect & { cursorAt: string };

function present(row: AuditRow): z.infer<typeof auditEventSchema> {
  return {
    id: row.id,
    object: 'audit_event',
    action: row.action,
    actor_token_id: row.actorTokenId,
    actor_member_id: row.actorMemberId,
    resource_type: row.resourceType,
    resource_id: row.resourceId,
    project_id: row.projectId,
    before_version: row.beforeVersion,
    after_version: row.afterVersion,
    detail: row.detail ? (withoutSecrets(row.detail) as Record<string, unknown>) : null,
    created_at: unixSeconds(row.createdAt),
  };
}

/** Newest first by `(created_at, id)`; the cursor carries the time to the microsecond. */
const KEYSET: Keyset = { key: auditEvents.createdAt, id: auditEvents.id, order: 'desc', type: 'timestamptz' };

/** The rows after the client's `cursor`; a cursor naming no real place is 400 naming `cursor`. */
function afterAuditCursor(cursor: Cursor | null): SQL | undefined {
  try {
    return afterCursor(KEYSET, cursor);
  } catch {
    throw new GatewayError('invalid_request', 'Invalid `cursor`: pass the `next_cursor` of the previous page.');
  }
}

export function auditEventRoutes(router: Router<GatewayState>, deps: { db: Database; clock: Clock }): void {
  router.get('/audit_events', async (ctx) => {
    const principal = authorize(ctx, 'audit:read');
    const query = parseInput(auditQuery, ctx.query, 'query');
    const cursor = readCursor(query.cursor, 'cursor');
    const earliest = historyStart(principal.plan, deps.clock.now());
    const from = query.from && query.from > earliest ? query.from : earliest;

    const where: SQL[] = [eq(auditEvents.orgId, principal.orgId), gte(auditEvents.createdAt, from)];
    // In the query, so a restricted token's pages are full; rows without a project never match.
    if (principal.projectIds) where.push(inArray(auditEvents.projectId, principal.projectIds));
    if (query.to) where.push(lt(auditEvents.createdAt, query.to));
    if (query.action) where.push(eq(auditEvents.action, query.action));
    if (query.actor) where.push(or(eq(auditEvents.actorTokenId, query.actor), eq(auditEvents.actorMemberId, query.actor))!);
    if (query.q) {
      const pattern = literalLike(query.q);
      where.push(or(
        ilike(auditEvents.action, pattern), ilike(auditEvents.resourceType, pattern), ilike(auditEvents.resourceId, pattern),
        ilike(auditEvents.actorTokenId, pattern), ilike(auditEvents.actorMemberId, pattern),
      )!);
    }
    const after = afterAuditCursor(cursor);
    if (after) where.push(after);

    const rows = await deps.db.select({ ...getColumns(), cursorAt: timestampKey(auditEvents.createdAt) }).from(auditEvents)
      .where(and(...where))
      .orderBy(...keysetOrder(KEYSET))
      .limit(query.limit + 1);
    ctx.body = pageOf(rows, query.limit, (row) => ({ at: row.cursorAt, id: row.id }), present);
  });
}

function getColumns() {
  const { id, orgId, actorTokenId, actorMemberId, action, resourceType, resourceId, projectId, beforeVersion, afterVersion, detail, createdAt } = auditEvents;
  return { id, orgId, actorTokenId, actorMemberId, action, resourceType, resourceId, projectId, beforeVersion, afterVersion, detail, createdAt };
}

export function auditEventPaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  return {
    '/audit_events': {
      get: {
        tags: ['audit'],
        operationId: 'listAuditEvents',
        summary: 'The audit log of management writes, newest first, within the plan\'s history window (trial 7 days, team 30, business 90). A project-restricted token reads only writes that concern its projects. A data operation: no version, not exported. Scope `audit:read`.',
        requestParams: { query: auditQuery },
        responses: { '200': { description: 'One page of events.', content: { 'application/json': { schema: auditEventListSchema } } }, ...errors },
      },
    },
  };
}
