import Router from '@koa/router';
import { and, eq } from 'drizzle-orm';
import { publishConfigChange } from '../../../core/cache/config-changes';
import type { Clock } from '../../../core/clock';
import { appendAudit } from '../../../core/audit';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import type { Database, Transaction } from '../../../core/db/client';
import { GatewayError } from '../../../core/errors';
import { withIdempotency } from '../../../core/idempotency';
import type { RedisHandle } from '../../../core/redis';
import type { GatewayContext, GatewayState } from '../../context';
import { authorize, requireProjectAccess } from '../../middleware/management-auth';
import { parseInput } from '../../validation';
import { etag, parseIfMatch, versionConflict } from '../if-match';
import type { ResourceCall, ResourceType, VersionedRow } from './resource-type';

export type ResourceRouterDeps = { db: Database; redis: RedisHandle; clock: Clock };

/** Unix seconds for every timestamp on the wire. */
export function unix(d: Date | null | undefined): number | null {
  return d ? Math.floor(d.getTime() / 1000) : null;
}

export function envelope<Row extends VersionedRow>(resource: ResourceType<Row>, row: Row): Record<string, unknown> {
  return { id: row.id, object: resource.object, ...resource.present(row), version: row.version, managed_by: row.managedBy };
}

/** Writes a row's changes as its next version; the WHERE on the version makes a lost race a conflict. */
async function writeNextVersion(tx: Transaction, resource: ResourceType, row: VersionedRow, changes: Record<string, unknown>, now: Date): Promise<VersionedRow> {
  const table = resource.table;
  const [next] = (await tx
    .update(table)
    .set({ ...changes, version: row.version + 1, updatedAt: now } as never)
    .where(and(eq(table.id, row.id), eq(table.version, row.version)))
    .returning()) as unknown as VersionedRow[];
  if (!next) throw versionConflict(row.version + 1);
  return next;
}

function auditWrite(
  tx: Transaction,
  principal: ManagementPrincipal,
  resource: ResourceType,
  verb: 'create' | 'update' | 'delete',
  resourceId: string,
  versions: [before: number | null, after: number | null],
  detail?: Record<string, unknown>,
): Promise<void> {
  return appendAudit(tx, {
    orgId: principal.orgId,
    actor: { tokenId: principal.tokenId, memberId: principal.memberId },
    action: `${resource.type}.${verb}`,
    resourceType: resource.type,
    resourceId,
    beforeVersion: versions[0],
    afterVersion: versions[1],
    detail,
  });
}

function queryOf(ctx: GatewayContext): ResourceCall['query'] {
  return ctx.query as ResourceCall['query'];
}

/**
 * The generic management operations for every registered resource type (spec 4.4):
 * list, read, create (with Idempotency-Key), patch and delete (with If-Match), each audited,
 * each publishing a config change so every API instance drops cached configuration.
 */
export function resourceRouter(resources: readonly ResourceType<never>[], deps: ResourceRouterDeps): Router<GatewayState> {
  const byType = new Map<string, ResourceType>(resources.map((r) => [r.type, r as unknown as ResourceType]));
  const router = new Router<GatewayState>();

  function resourceFor(ctx: GatewayContext): ResourceType {
    const resource = byType.get(ctx.params.type!);
    if (!resource) throw new GatewayError('unknown_resource_type', `There is no resource type \`${ctx.params.type}\`.`);
    return resource;
  }

  function unsupported(resource: ResourceType, what: string): GatewayError {
    return new GatewayError('operation_not_supported', `\`${resource.type}\` does not support ${what}.`);
  }

  async function visible(resource: ResourceType, ctx: GatewayContext, db: Parameters<ResourceType['find']>[0], forUpdate: boolean) {
    const principal = ctx.state.principal!;
    const row = await resource.find(db, principal.orgId, ctx.params.id!, { forUpdate });
    if (!row) throw new GatewayError('resource_not_found', `No ${resource.object} \`${ctx.params.id}\`.`);
    const project = resource.projectOf?.(row);
    if (project) requireProjectAccess(ctx, project);
    return row;
  }

  async function changed(resource: ResourceType, id: string) {
    await publishConfigChange(deps.redis, `${resource.type}:${id}`).catch(() => undefined);
  }

  router.get('/:type', async (ctx) => {
    const resource = resourceFor(ctx);
    if (!resource.list) throw unsupported(resource, 'list');
    const principal = authorize(ctx, `${resource.scope}:read`);
    const rows = await resource.list(deps.db, principal);
    const allowed = principal.projectIds;
    const data = rows
      .filter((row) => !allowed || !resource.projectOf || allowed.includes(resource.projectOf(row) ?? ''))
      .map((row) => envelope(resource, row));
    ctx.body = { object: 'list', data, has_more: false };
  });

  router.get('/:type/:id', async (ctx) => {
    const resource = resourceFor(ctx);
    authorize(ctx, `${resource.scope}:read`);
    const row = await visible(resource, ctx, deps.db, false);
    ctx.set('ETag', etag(row.version));
    ctx.body = envelope(resource, row);
  });

  router.post('/:type', async (ctx) => {
    const resource = resourceFor(ctx);
    if (!resource.create || !resource.createSchema) throw unsupported(resource, 'create');
    const principal = authorize(ctx, `${resource.scope}:write`);
    const input = parseInput(resource.createSchema, ctx.state.body ?? {});
    const now = deps.clock.now();

    const perform = async () => {
      const result = await deps.db.transaction(async (tx) => {
        const call: ResourceCall = { db: tx, principal, now, query: queryOf(ctx) };
        const { row, reveal, auditDetail } = await resource.create!(call, input as never);
        await auditWrite(tx, principal, resource, 'create', row.id, [null, row.version], auditDetail);
        return { status: 201, body: { ...envelope(resource, row), ...reveal } };
      });
      await changed(resource, (result.body as { id: string }).id);
      return result;
    };

    const idempotencyKey = ctx.get('idempotency-key');
    const answer = idempotencyKey
      ? await withIdempotency(deps.db, { orgId: principal.orgId, scope: `manage:${resource.type}`, key: idempotencyKey, request: ctx.state.body ?? null, now }, perform)
      : await perform();
    ctx.status = answer.status;
    ctx.set('ETag', etag((answer.body as { version: number }).version));
    ctx.body = answer.body;
  });

  router.patch('/:type/:id', async (ctx) => {
    const resource = resourceFor(ctx);
    if (!resource.patch || !resource.patchSchema) throw unsupported(resource, 'patch');
    const principal = authorize(ctx, `${resource.scope}:write`);
    const expected = parseIfMatch(ctx.get('if-match') || undefined, true)!;
    const input = parseInput(resource.patchSchema, ctx.state.body ?? {});
    const now = deps.clock.now();

    const updated = await deps.db.transaction(async (tx) => {
      const row = await visible(resource, ctx, tx, true);
      if (row.version !== expected) throw versionConflict(row.version);
      const changes = await resource.patch!({ db: tx, principal, now, query: queryOf(ctx) }, row, input as never);
      const next = await writeNextVersion(tx, resource, row, changes, now);
      await auditWrite(tx, principal, resource, 'update', row.id, [row.version, next.version], { fields: Object.keys(input as object) });
      return next;
    });
    await changed(resource, updated.id);
    ctx.set('ETag', etag(updated.version));
    ctx.body = envelope(resource, updated);
  });

  router.delete('/:type/:id', async (ctx) => {
    const resource = resourceFor(ctx);
    if (!resource.remove) throw unsupported(resource, 'delete');
    const principal = authorize(ctx, `${resource.scope}:write`);
    const expected = parseIfMatch(ctx.get('if-match') || undefined, true)!;
    const now = deps.clock.now();

    const body = await deps.db.transaction(async (tx) => {
      const row = await visible(resource, ctx, tx, true);
      if (row.version !== expected) throw versionConflict(row.version);
      const outcome = await resource.remove!({ db: tx, principal, now, query: queryOf(ctx) }, row);
      if (outcome === 'delete') {
        await tx.delete(resource.table).where(eq(resource.table.id, row.id));
        await auditWrite(tx, principal, resource, 'delete', row.id, [row.version, null]);
        return { id: row.id, object: resource.object, deleted: true };
      }
      const next = await writeNextVersion(tx, resource, row, outcome, now);
      await auditWrite(tx, principal, resource, 'delete', row.id, [row.version, next.version]);
      ctx.set('ETag', etag(next.version));
      return envelope(resource, next);
    });
    await changed(resource, ctx.params.id!);
    ctx.body = body;
  });

  return router;
}
