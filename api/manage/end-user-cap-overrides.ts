import type Router from '@koa/router';
import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import { appendAudit } from '../../core/audit';
import { scopeGranted } from '../../core/auth/scopes';
import type { ManagementPrincipal } from '../../core/auth/management-token-auth';
import { publishConfigChange } from '../../core/cache/config-changes';
import { unixOrNull, type Clock } from '../../core/clock';
import type { Database, Executor } from '../../core/db/client';
import { endUserCapOverrides } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { afterCursor, type Keyset, keysetOrder, listEnvelope, pageOf, pageQuery, readCursor } from '../../core/paging';
import type { RedisHandle } from '../../core/redis';
import { MAX_END_USER_ID_LENGTH, normalizeDecimalDollars } from '../../core/spend/end-user-caps';
import type { GatewayContext, GatewayState } from '../context';
import { authorize } from '../middleware/management-auth';
import { parseInput } from '../validation';
import { etag, parseIfMatch, versionConflict } from './if-match';
import { decimalDollarsField, endUserCapRulesResource } from './resources/end-user-cap-rules';

/**
 * Overrides under an end-customer cap rule (spec 4.4): `GET`, `PUT`, `DELETE
 * /end_user_cap_rules/{rule}/overrides/{end_user_id}` and `GET .../overrides`. An override is
 * addressed by the customer's own id, so a customer's backend can set it without storing ours.
 * Writes need `end_users:write`; reads `end_users:read` (or `*:read`) or `end_users:write`,
 * so a token holding only `end_users:write` can do exactly these operations.
 */

const WRITE_SCOPE = 'end_users:write';
const READ_SCOPE = 'end_users:read';
const OBJECT = 'end_user_cap_override';
const AUDIT_TYPE = 'end_user_cap_overrides';

export const overrideSchema = z.object({
  object: z.literal(OBJECT),
  rule_id: z.string(),
  end_user_id: z.string().meta({ description: 'The customer\'s own id, as sent in `metadata.user_id`.' }),
  amount: z.string().meta({ description: 'Decimal dollars per period; replaces the rule\'s default amount for this customer.' }),
  version: z.number().int().meta({ description: 'Send it back in If-Match; also the ETag.' }),
  created_at: z.number().int(),
  updated_at: z.number().int(),
}).meta({ id: 'EndUserCapOverride' });

export const overrideListSchema = listEnvelope(overrideSchema);
const deletedSchema = z.object({ object: z.literal(OBJECT), rule_id: z.string(), end_user_id: z.string(), deleted: z.literal(true) });

const putSchema = z.strictObject({ amount: decimalDollarsField });
const endUserIdSchema = z.string().min(1).max(MAX_END_USER_ID_LENGTH);
/** Spec 4.4 names `limit` and `starting_after` here; `after` (the list envelope's `next_cursor`) works too. */
const listQuery = pageQuery(20).extend({
  after: pageQuery().shape.after.meta({ description: 'The `next_cursor` of the previous page; absent or empty reads the first page.' }),
  // Empty, like an empty `after`, reads the first page: a client passing back what it was given never gets a 400.
  starting_after: z.string().max(MAX_END_USER_ID_LENGTH).optional().meta({ description: 'Or: the `end_user_id` of the last override of the previous page.' }),
});
/** Natural order: by the customer's own id, the key an override is addressed by. */
const OVERRIDE_ORDER: Keyset = { key: endUserCapOverrides.endUserId, id: endUserCapOverrides.endUserId, order: 'asc', type: 'text' };

type OverrideRow = typeof endUserCapOverrides.$inferSelect;

/** An override as its GET shows it (also the export's). */
export function present(row: OverrideRow): z.infer<typeof overrideSchema> {
  return {
    object: OBJECT,
    rule_id: row.ruleId,
    end_user_id: row.endUserId,
    amount: normalizeDecimalDollars(row.amount),
    version: row.version,
    created_at: unixOrNull(row.createdAt)!,
    updated_at: unixOrNull(row.updatedAt)!,
  };
}

function readPrincipal(ctx: GatewayContext): ManagementPrincipal {
  const held = ctx.state.principal?.scopes ?? [];
  return authorize(ctx, scopeGranted(held, WRITE_SCOPE) && !scopeGranted(held, READ_SCOPE) ? WRITE_SCOPE : READ_SCOPE, 'viewer');
}

export type OverrideRouteDeps = { db: Database; redis: RedisHandle; clock: Clock };

export function endUserCapOverrideRoutes(router: Router<GatewayState>, deps: OverrideRouteDeps): void {
  const notFound = (what: string) => new GatewayError('resource_not_found', what);

  /** The rule, if the token may see it; a project rule outside a restricted token's reach is 404. */
  async function ruleFor(ctx: GatewayContext, db: Executor, principal: ManagementPrincipal, write: boolean) {
    const ruleId = ctx.params.rule!;
    const rule = await endUserCapRulesResource.find(db, principal.orgId, ruleId, { forUpdate: false });
    const allowed = principal.projectIds;
    if (!rule || (allowed && rule.projectId !== null && !allowed.includes(rule.projectId))) {
      throw notFound(`No end_user_cap_rule \`${ruleId}\`.`);
    }
    if (write && allowed && rule.projectId === null) {
      throw new GatewayError('project_restricted', 'This token is restricted to projects; overrides of the organization-wide rule need an unrestricted token.');
    }
    return rule;
  }

  function endUserIdOf(ctx: GatewayContext): string {
    return parseInput(endUserIdSchema, ctx.params.end_user_id, 'end_user_id');
  }

  function missing(ruleId: string, endUserId: string) {
    return notFound(`No override for end customer \`${endUserId}\` under rule \`${ruleId}\`.`);
  }

  async function changed(orgId: string, ruleId: string) {
    await publishConfigChange(deps.redis, { orgId, what: `${AUDIT_TYPE}:${ruleId}` }).catch(() => undefined);
  }

  /** An override belongs to its rule's project (none under the organization rule). */
  function audit(tx: Executor, principal: ManagementPrincipal, verb: string, rule: { id: string; projectId: string | null }, endUserId: string, versions: [number | null, number | null], amount?: string) {
    const ruleId = rule.id;
    return appendAudit(tx, {
      orgId: principal.orgId,
      actor: { tokenId: principal.tokenId, memberId: principal.memberId },
      action: `${AUDIT_TYPE}.${verb}`,
      resourceType: AUDIT_TYPE,
      resourceId: `${ruleId}/${endUserId}`,
      projectId: rule.projectId,
      beforeVersion: versions[0],
      afterVersion: versions[1],
      detail: { rule_id: ruleId, end_user_id: endUserId, ...(amount !== undefined && { amount }) },
    });
  }

  const selectOverride = (db: Executor, ruleId: string, endUserId: string) =>
    db.select().from(endUserCapOverrides).where(and(eq(endUserCapOverrides.ruleId, ruleId), eq(endUserCapOverrides.endUserId, endUserId)));

  router.get('/end_user_cap_rules/:rule/overrides', async (ctx) => {
    const principal = readPrincipal(ctx);
    const rule = await ruleFor(ctx, deps.db, principal, false);
    const query = parseInput(listQuery, ctx.query, 'query');
    const startingAfter = query.starting_after || undefined;
    if (query.after && startingAfter !== undefined) throw new GatewayError('invalid_request', 'Invalid `after`: pass either `after` or `starting_after`, not both.');
    const start = readCursor(query.after) ?? (startingAfter !== undefined ? { at: startingAfter, id: startingAfter } : null);
    // `starting_after` and the cursor compare in the list's own order, so pages neither skip nor repeat.
    const rows = await deps.db.select().from(endUserCapOverrides)
      .where(and(eq(endUserCapOverrides.ruleId, rule.id), afterCursor(OVERRIDE_ORDER, start)))
      .orderBy(...keysetOrder(OVERRIDE_ORDER))
      .limit(query.limit + 1);
    ctx.body = pageOf(rows, query.limit, (row) => ({ at: row.endUserId, id: row.endUserId }), present);
  });

  router.get('/end_user_cap_rules/:rule/overrides/:end_user_id', async (ctx) => {
    const principal = readPrincipal(ctx);
    const rule = await ruleFor(ctx, deps.db, principal, false);
    const endUserId = endUserIdOf(ctx);
    const [row] = await selectOverride(deps.db, rule.id, endUserId);
    if (!row) throw missing(rule.id, endUserId);
    ctx.set('ETag', etag(row.version));
    ctx.body = present(row);
  });

  /**
   * Idempotent upsert. Without If-Match it sets the amount whatever the version; with one, the
   * override must exist at that version (409 version_conflict otherwise). Setting the amount it
   * already has changes nothing: same version, no audit row.
   */
  router.put('/end_user_cap_rules/:rule/overrides/:end_user_id', async (ctx) => {
    const principal = authorize(ctx, WRITE_SCOPE);
    const expected = parseIfMatch(ctx.get('if-match') || undefined, false);
    const endUserId = endUserIdOf(ctx);
    const { amount } = parseInput(putSchema, ctx.state.body ?? {});
    const now = deps.clock.now();

    const outcome = await deps.db.transaction(async (tx) => {
      const rule = await ruleFor(ctx, tx, principal, true);
      for (;;) {
        const [current] = await selectOverride(tx, rule.id, endUserId).for('update');
        if (!current) {
          if (expected !== null) {
            throw new GatewayError('version_conflict', `There is no override for end customer \`${endUserId}\` any more; PUT without If-Match to create it.`);
          }
          // A concurrent PUT may create it first: then this one updates it instead.
          const [created] = await tx.insert(endUserCapOverrides)
            .values({ ruleId: rule.id, endUserId, amount, createdAt: now, updatedAt: now })
            .onConflictDoNothing()
            .returning();
          if (!created) continue;
          await audit(tx, principal, 'create', rule, endUserId, [null, created.version], amount);
          return { status: 201, row: created, changed: true };
        }
        if (expected !== null && current.version !== expected) throw versionConflict(current.version);
        if (normalizeDecimalDollars(current.amount) === amount) return { status: 200, row: current, changed: false };
        const [next] = await tx.update(endUserCapOverrides)
          .set({ amount, version: current.version + 1, updatedAt: now })
          .where(and(eq(endUserCapOverrides.ruleId, rule.id), eq(endUserCapOverrides.endUserId, endUserId)))
          .returning();
        await audit(tx, principal, 'update', rule, endUserId, [current.version, next!.version], amount);
        return { status: 200, row: next!, changed: true };
      }
    });
    if (outcome.changed) await changed(principal.orgId, outcome.row.ruleId);
    ctx.status = outcome.status;
    ctx.set('ETag', etag(outcome.row.version));
    ctx.body = present(outcome.row);
  });

  router.delete('/end_user_cap_rules/:rule/overrides/:end_user_id', async (ctx) => {
    const principal = authorize(ctx, WRITE_SCOPE);
    const expected = parseIfMatch(ctx.get('if-match') || undefined, false);
    const endUserId = endUserIdOf(ctx);

    const ruleId = await deps.db.transaction(async (tx) => {
      const rule = await ruleFor(ctx, tx, principal, true);
      const [current] = await selectOverride(tx, rule.id, endUserId).for('update');
      if (!current) throw missing(rule.id, endUserId);
      if (expected !== null && current.version !== expected) throw versionConflict(current.version);
      await tx.delete(endUserCapOverrides).where(and(eq(endUserCapOverrides.ruleId, rule.id), eq(endUserCapOverrides.endUserId, endUserId)));
      await audit(tx, principal, 'delete', rule, endUserId, [current.version, null]);
      return rule.id;
    });
    await changed(principal.orgId, ruleId);
    ctx.body = { object: OBJECT, rule_id: ruleId, end_user_id: endUserId, deleted: true };
  });
}

/** The override operations for the OpenAPI document. */
export function endUserCapOverridePaths(errors: Record<string, unknown>): ZodOpenApiPathsObject {
  const tags = ['end_user_cap_rules'];
  const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
  const ruleParam = z.object({ rule: z.string().meta({ description: 'The end_user_cap_rule id.' }) });
  const path = ruleParam.extend({ end_user_id: endUserIdSchema.meta({ description: 'The customer\'s own id (`metadata.user_id`), URL-encoded.' }) });
  const ifMatch = z.object({
    'if-match': z.string().regex(/^"\d+"$/).optional().meta({ description: 'Optional: the version you read, quoted. A stale one gives 409 version_conflict.' }),
  });
  const readScope = 'Scope `end_users:read` (or `*:read`) or `end_users:write`.';
  const writeScope = 'Scope `end_users:write`.';
  return {
    '/end_user_cap_rules/{rule}/overrides': {
      get: {
        tags,
        operationId: 'listEndUserCapOverrides',
        summary: `List a rule's overrides by \`end_user_id\`. ${readScope}`,
        requestParams: { path: ruleParam, query: listQuery },
        responses: { '200': json(overrideListSchema, 'A page of overrides.'), ...errors },
      },
    },
    '/end_user_cap_rules/{rule}/overrides/{end_user_id}': {
      get: {
        tags,
        operationId: 'getEndUserCapOverride',
        summary: `Read one customer's override. ${readScope}`,
        requestParams: { path },
        responses: { '200': json(overrideSchema, 'The override.'), ...errors },
      },
      put: {
        tags,
        operationId: 'putEndUserCapOverride',
        summary: `Set one customer's amount (idempotent). ${writeScope}`,
        requestParams: { path, header: ifMatch },
        requestBody: { content: { 'application/json': { schema: putSchema } } },
        responses: { '200': json(overrideSchema, 'The override, replaced or unchanged.'), '201': json(overrideSchema, 'The new override.'), ...errors },
      },
      delete: {
        tags,
        operationId: 'deleteEndUserCapOverride',
        summary: `Remove one customer's override: the rule's default amount applies again. ${writeScope}`,
        requestParams: { path, header: ifMatch },
        responses: { '200': json(deletedSchema, 'A deletion marker.'), ...errors },
      },
    },
  };
}
