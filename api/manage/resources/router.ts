import Router from '@koa/router';
import { and, eq } from 'drizzle-orm';
import { publishConfigChange } from '../../../core/cache/config-changes';
import { unixOrNull, type Clock } from '../../../core/clock';
import { appendAudit } from '../../../core/audit';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import type { Database, Executor, Transaction } from '../../../core/db/client';
import { GatewayError } from '../../../core/errors';
import { withIdempotency } from '../../../core/idempotency';
import { pageOf, readPage } from '../../../core/paging';
import type { RedisHandle } from '../../../core/redis';
import type { GatewayContext, GatewayState } from '../../context';
import { authorize, requireAdminCreator, requirePlan } from '../../middleware/management-auth';
import { parseInput } from '../../validation';
import { etag, parseIfMatch, versionConflict } from '../if-match';
import type { ManagementServices } from '../services';
import type { PlanGatedWrite, ResourceCall, ResourceType, VersionedRow } from './resource-type';

export type ResourceRouterDeps = { db: Database; redis: RedisHandle; clock: Clock; manage: ManagementServices };

/** Unix seconds for every timestamp on the wire. */
export { unixOrNull as unix };

/**
 * A row on the wire: id, object, the type's fields, then its version for If-Match. A data type
 * (findings) is not a resource on the wire (spec 4.4): no `version`, no `managed_by`, no ETag.
 */
export function envelope<Row extends VersionedRow>(resource: ResourceType<Row>, row: Row): Record<string, unknown> {
  if (resource.data) return { id: row.id, object: resource.object, ...resource.present(row) };
  return { id: row.id, object: resource.object, ...resource.present(row), version: row.version, managed_by: row.managedBy };
}

/**
 * Writes a row's changes as its next version; the WHERE on the version makes a lost race a
 * conflict. Answers the row as the resource reads it (some resources join other tables).
 */
async function writeNextVersion(tx: Transaction, resource: ResourceType, row: VersionedRow, changes: Record<string, unknown>, now: Date): Promise<VersionedRow> {
  const { table, id } = resource.storedIn?.(row) ?? { table: resource.table!, id: row.id };
  const [next] = (await tx
    .update(table)
    .set({ ...changes, version: row.version + 1, updatedAt: now } as never)
    .where(and(eq(table.id, id), eq(table.version, row.version)))
    .returning()) as unknown as VersionedRow[];
  if (!next) throw versionConflict(row.version + 1);
  return (await resource.find(tx, row.orgId, row.id, { forUpdate: false, includeHidden: true })) ?? next;
}

/**
 * The audit row of a write, in its transaction. `row` is the row written (as it was before a
 * delete); its project (`projectOf`) goes on the audit row so a project-restricted token reads
 * its projects' history. A type without projects, or a collection action, writes an
 * organization-level row (no project).
 */
function auditWrite(
  tx: Transaction,
  principal: ManagementPrincipal,
  resource: ResourceType,
  verb: string,
  row: VersionedRow | null,
  versions: [before: number | null, after: number | null],
  detail?: Record<string, unknown>,
): Promise<void> {
  return appendAudit(tx, {
    orgId: principal.orgId,
    actor: { tokenId: principal.tokenId, memberId: principal.memberId },
    action: `${resource.type}.${verb}`,
    resourceType: resource.type,
    resourceId: row?.id ?? principal.orgId,
    projectId: row && resource.projectOf ? resource.projectOf(row) : null,
    beforeVersion: versions[0],
    afterVersion: versions[1],
    detail,
  });
}

/** An answer, with the fields shown only once (secrets) apart so they are never stored. */
type Answer = { status: number; body: Record<string, unknown>; reveal?: Record<string, unknown> };

/**
 * Runs a write, turning a unique-index violation into the resource's own 400 (two concurrent
 * creates with one name: the loser gets `duplicate_connection_name`, not a 500).
 */
async function mappingConflicts<T>(resource: ResourceType, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    const cause = (err as { cause?: { code?: string; constraint?: string } }).cause ?? (err as { code?: string; constraint?: string });
    const mapped = cause?.code === '23505' && cause.constraint ? resource.uniqueConflict?.(cause.constraint) : undefined;
    throw mapped ?? err;
  }
}

/**
 * The generic management operations for every registered resource type (spec 4.4):
 * list, read, create and actions (with Idempotency-Key), patch and delete (with If-Match),
 * each audited, each publishing a config change so every API instance drops cached
 * configuration. Singleton types (org_settings) are read and patched at `/<type>`.
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

  /**
   * Scope and role of a write, then the project restriction (issue 10): a token restricted to
   * projects reads organization-wide types but cannot write them (403 project_restricted).
   * Types whose rows belong to projects (`projectOf`) check a create's project themselves.
   */
  function writer(ctx: GatewayContext, resource: ResourceType): ManagementPrincipal {
    const principal = authorize(ctx, `${resource.scope}:write`, resource.writeRole ?? 'member');
    if (principal.projectIds && !resource.projectOf) {
      throw new GatewayError('project_restricted', `This token is restricted to projects; \`${resource.type}\` belongs to the whole organization and needs an unrestricted token to change.`);
    }
    return principal;
  }

  /**
   * 403 plan_feature when the organization's plan is below what this write needs (spec 5.6),
   * then the type's own gate (an organization setting), both before the resource is read.
   */
  async function checkPlan(ctx: GatewayContext, resource: ResourceType, write: PlanGatedWrite): Promise<void> {
    const minimum = resource.planFor?.(write);
    const what = write.kind === 'action' ? `\`${write.action}\` on ${resource.type}` : `${write.kind === 'remove' ? 'Deleting' : write.kind === 'create' ? 'Creating' : 'Changing'} ${resource.type}`;
    if (minimum) requirePlan(ctx, minimum, what);
    await resource.gate?.(deps.db, ctx.state.principal!, write);
  }

  /** A row of a project type that belongs to no project (an organization-wide rule) is read-only to a restricted token. */
  function checkRowWritable(ctx: GatewayContext, resource: ResourceType, row: VersionedRow): void {
    if (ctx.state.principal!.projectIds && resource.projectOf && resource.projectOf(row) === null) {
      throw new GatewayError('project_restricted', 'This token is restricted to projects; this organization-wide entry needs an unrestricted token to change.');
    }
  }

  function callFor(ctx: GatewayContext, db: Executor, principal: ManagementPrincipal, now: Date): ResourceCall {
    return { db, principal, now, query: ctx.query as ResourceCall['query'], services: deps.manage };
  }

  /**
   * The row the caller may see, or 404. Rows of other organizations and of projects outside a
   * restricted token's reach answer the same: no hint that they exist.
   */
  async function visible(resource: ResourceType, ctx: GatewayContext, db: Executor, id: string, forUpdate: boolean, includeHidden = false) {
    const principal = ctx.state.principal!;
    const row = await resource.find(db, principal.orgId, id, { forUpdate, includeHidden });
    const project = row && resource.projectOf?.(row);
    if (!row || (project && principal.projectIds && !principal.projectIds.includes(project))) {
      throw new GatewayError('resource_not_found', `No ${resource.object} \`${id}\`.`);
    }
    return row;
  }

  function idOf(ctx: GatewayContext, resource: ResourceType): string {
    return resource.singleton ? ctx.state.principal!.orgId : ctx.params.id!;
  }

  async function changed(ctx: GatewayContext, resource: ResourceType, ...ids: string[]) {
    const orgId = ctx.state.principal!.orgId;
    for (const id of new Set(ids)) await publishConfigChange(deps.redis, { orgId, what: `${resource.type}:${id}` }).catch(() => undefined);
  }

  /** Runs a POST once per Idempotency-Key (spec 4.4): a replay answers the first status and body. */
  async function once(ctx: GatewayContext, principal: ManagementPrincipal, scope: string, now: Date, perform: () => Promise<Answer>): Promise<void> {
    const key = ctx.get('idempotency-key');
    const answer = key
      ? await withIdempotency(deps.db, { orgId: principal.orgId, scope, key, request: ctx.state.body ?? null, now }, perform)
      : await perform().then((a) => ({ status: a.status, body: { ...a.body, ...a.reveal } }));
    ctx.status = answer.status;
    const version = (answer.body as { version?: number }).version;
    if (version !== undefined) ctx.set('ETag', etag(version));
    ctx.body = answer.body;
  }

  async function read(ctx: GatewayContext, resource: ResourceType) {
    authorize(ctx, `${resource.scope}:read`);
    const row = await visible(resource, ctx, deps.db, idOf(ctx, resource), false);
    if (!resource.data) ctx.set('ETag', etag(row.version));
    ctx.body = envelope(resource, row);
  }

  async function patch(ctx: GatewayContext, resource: ResourceType) {
    if (!resource.patch || !resource.patchSchema) throw unsupported(resource, 'patch');
    const principal = writer(ctx, resource);
    const expected = parseIfMatch(ctx.get('if-match') || undefined, true)!;
    const input = parseInput(resource.patchSchema, ctx.state.body ?? {});
    await checkPlan(ctx, resource, { kind: 'patch', input });
    const now = deps.clock.now();

    const updated = await mappingConflicts(resource, () => deps.db.transaction(async (tx) => {
      const row = await visible(resource, ctx, tx, idOf(ctx, resource), true);
      checkRowWritable(ctx, resource, row);
      if (row.version !== expected) throw versionConflict(row.version);
      const changes = await resource.patch!(callFor(ctx, tx, principal, now), row, input as never);
      const next = await writeNextVersion(tx, resource, row, changes, now);
      await auditWrite(tx, principal, resource, 'update', row, [row.version, next.version], { fields: Object.keys(input as object) });
      return next;
    }));
    await changed(ctx, resource, updated.id);
    ctx.set('ETag', etag(updated.version));
    ctx.body = envelope(resource, updated);
  }

  router.get('/:type', async (ctx) => {
    const resource = resourceFor(ctx);
    if (resource.singleton) return read(ctx, resource);
    if (!resource.list) throw unsupported(resource, 'list');
    const principal = authorize(ctx, `${resource.scope}:read`);
    const page = readPage(ctx.query);
    const filters = resource.listFilters ? parseInput(resource.listFilters, ctx.query, 'query') : {};
    const listed = await resource.list(deps.db, principal, page, filters as never);
    const allowed = principal.projectIds;
    // Rows of other projects are invisible; organization-wide rows (no project) are readable.
    // Each list leaves them out in its query (so pages are full); this is a second guard only.
    const inReach = (row: VersionedRow) => !allowed || !resource.projectOf || [null, ...allowed].includes(resource.projectOf(row));
    const body = pageOf(listed, page.limit, (l) => l.cursor, (l) => l.row);
    ctx.body = { ...body, data: body.data.filter(inReach).map((row) => envelope(resource, row)) };
  });

  // A read-only list under one resource (`subLists`); other paths of this shape are not the framework's.
  router.get('/:type/:id/:sub', async (ctx, next) => {
    const resource = byType.get(ctx.params.type!);
    const subList = resource?.subLists && Object.hasOwn(resource.subLists, ctx.params.sub!) ? resource.subLists[ctx.params.sub!] : undefined;
    if (!resource || !subList) return next();
    authorize(ctx, `${resource.scope}:read`);
    const row = await visible(resource, ctx, deps.db, ctx.params.id!, false);
    const page = readPage(ctx.query);
    ctx.body = pageOf(await subList.list(deps.db, row, page), page.limit, (l) => l.cursor, (l) => l.entry);
  });

  router.get('/:type/:id', async (ctx) => {
    const resource = resourceFor(ctx);
    if (resource.singleton) throw unsupported(resource, 'reads by id; read it at its own path');
    await read(ctx, resource);
  });

  router.post('/:type', async (ctx) => {
    const resource = resourceFor(ctx);
    if (!resource.create || !resource.createSchema) throw unsupported(resource, 'create');
    const principal = writer(ctx, resource);
    const input = parseInput(resource.createSchema, ctx.state.body ?? {});
    await checkPlan(ctx, resource, { kind: 'create', input });
    const now = deps.clock.now();

    await once(ctx, principal, `manage:${resource.type}`, now, async () => {
      const prepared = await resource.precheckCreate?.({ principal, now, query: ctx.query as ResourceCall['query'], services: deps.manage }, input as never);
      const result = await mappingConflicts(resource, () => deps.db.transaction(async (tx) => {
        const { row, reveal, auditDetail } = await resource.create!(callFor(ctx, tx, principal, now), input as never, prepared as never);
        await auditWrite(tx, principal, resource, 'create', row, [null, row.version], auditDetail);
        return { status: 201, body: envelope(resource, row), reveal };
      }));
      await changed(ctx, resource, result.body.id as string);
      return result;
    });
  });

  router.post('/:type/:id/:action', async (ctx) => {
    const resource = resourceFor(ctx);
    const action = resource.actions && Object.hasOwn(resource.actions, ctx.params.action!) ? resource.actions[ctx.params.action!] : undefined;
    if (!action) throw unsupported(resource, `\`${ctx.params.action}\``);
    const principal = writer(ctx, resource);
    if (action.adminCreator) requireAdminCreator(ctx);
    const expected = parseIfMatch(ctx.get('if-match') || undefined, action.ifMatch === 'required');
    const input = parseInput(action.schema, ctx.state.body ?? {});
    await checkPlan(ctx, resource, { kind: 'action', action: ctx.params.action!, input });
    const now = deps.clock.now();

    await once(ctx, principal, `manage:${resource.type}/${ctx.params.id}/${ctx.params.action}`, now, async () => {
      let prepared: { version: number; value: unknown } | null = null;
      if (action.prepare) {
        const row = await visible(resource, ctx, deps.db, ctx.params.id!, false, true);
        checkRowWritable(ctx, resource, row);
        if (expected !== null && expected !== undefined && row.version !== expected) throw versionConflict(row.version);
        prepared = { version: row.version, value: await action.prepare(callFor(ctx, deps.db, principal, now), row, input as never) };
      }
      const result = await mappingConflicts(resource, () => deps.db.transaction(async (tx) => {
        const row = await visible(resource, ctx, tx, ctx.params.id!, true, true);
        checkRowWritable(ctx, resource, row);
        if (expected !== null && expected !== undefined && row.version !== expected) throw versionConflict(row.version);
        if (prepared && row.version !== prepared.version) throw versionConflict(row.version);
        const outcome = await action.run(callFor(ctx, tx, principal, now), row, input as never, prepared?.value as never);
        const current = outcome.changes ? await writeNextVersion(tx, resource, row, outcome.changes, now) : row;
        await auditWrite(tx, principal, resource, ctx.params.action!, row, [row.version, current.version], outcome.auditDetail);
        const answered = outcome.answer ?? current;
        return { status: 200, body: envelope(resource, answered), reveal: outcome.reveal, ids: [row.id, answered.id] };
      }));
      await changed(ctx, resource, ...result.ids);
      return { status: result.status, body: result.body, reveal: result.reveal };
    });
  });

  router.post('/:type/:action', async (ctx) => {
    const resource = resourceFor(ctx);
    const action = resource.collectionActions && Object.hasOwn(resource.collectionActions, ctx.params.action!) ? resource.collectionActions[ctx.params.action!] : undefined;
    if (!action) throw unsupported(resource, `\`${ctx.params.action}\``);
    const principal = writer(ctx, resource);
    const input = parseInput(action.schema, ctx.state.body ?? {});
    await checkPlan(ctx, resource, { kind: 'action', action: ctx.params.action!, input });
    const now = deps.clock.now();

    await once(ctx, principal, `manage:${resource.type}/${ctx.params.action}`, now, async () => {
      const result = await deps.db.transaction(async (tx) => {
        const outcome = await action.run(callFor(ctx, tx, principal, now), input as never);
        await auditWrite(tx, principal, resource, ctx.params.action!, null, [null, null], outcome.auditDetail);
        return outcome;
      });
      await changed(ctx, resource, ...(result.changedIds ?? []));
      return { status: 200, body: result.body };
    });
  });

  router.patch('/:type', async (ctx) => {
    const resource = resourceFor(ctx);
    if (!resource.singleton) throw unsupported(resource, 'patch without an id');
    await patch(ctx, resource);
  });

  router.patch('/:type/:id', async (ctx) => {
    const resource = resourceFor(ctx);
    if (resource.singleton) throw unsupported(resource, 'patch by id; patch it at its own path');
    await patch(ctx, resource);
  });

  router.delete('/:type/:id', async (ctx) => {
    const resource = resourceFor(ctx);
    if (!resource.remove) throw unsupported(resource, 'delete');
    const principal = writer(ctx, resource);
    await checkPlan(ctx, resource, { kind: 'remove' });
    const expected = parseIfMatch(ctx.get('if-match') || undefined, true)!;
    const now = deps.clock.now();

    const body = await deps.db.transaction(async (tx) => {
      const row = await visible(resource, ctx, tx, ctx.params.id!, true);
      checkRowWritable(ctx, resource, row);
      if (row.version !== expected) throw versionConflict(row.version);
      const outcome = await resource.remove!(callFor(ctx, tx, principal, now), row);
      if (outcome === 'delete') {
        // Attached resources (storedIn) hide; only a resource with rows of its own deletes one.
        await tx.delete(resource.table!).where(eq(resource.table!.id, row.id));
        await auditWrite(tx, principal, resource, 'delete', row, [row.version, null]);
        return { id: row.id, object: resource.object, deleted: true };
      }
      if ('hide' in outcome) {
        const gone = await writeNextVersion(tx, resource, row, outcome.hide as Record<string, unknown>, now);
        await auditWrite(tx, principal, resource, 'delete', row, [row.version, gone.version]);
        return { id: row.id, object: resource.object, deleted: true };
      }
      const next = await writeNextVersion(tx, resource, row, outcome, now);
      await auditWrite(tx, principal, resource, 'delete', row, [row.version, next.version]);
      ctx.set('ETag', etag(next.version));
      return envelope(resource, next);
    });
    await changed(ctx, resource, ctx.params.id!);
    ctx.body = body;
  });

  return router;
}
