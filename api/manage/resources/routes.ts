import { and, eq, inArray, isNull } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../../core/db/client';
import { BATCH_MODES, FAILOVER_ACTIONS, FAILURE_KINDS, providerConnections, ROUTE_STRATEGIES, routes, type RouteTarget } from '../../../core/db/schema';
import { fullFailover } from '../../../core/routing/org-config';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { environmentFields, environmentsRead, nameField, presentEnvironments, slugField, resolveEnvironments, timeoutMsField, unixTime } from './fields';
import { newestFirst, selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

type RouteRow = typeof routes.$inferSelect;

export const MAX_ROUTE_RULES = 20;
const MAX_TARGETS = 50;

const targetSchema = z.strictObject({
  connection_id: z.string().min(1),
  model: z.string().min(1).max(200),
  weight: z.number().int().min(0).max(1000).optional(),
  enabled: z.boolean().optional(),
});
const targetsField = z.array(targetSchema).min(1).max(MAX_TARGETS);

/**
 * Rules are kept in the shape they were given (spec 2.6); the condition and match syntax is
 * the routing engine's business, so only the frame is checked here.
 */
const ruleSchema = z.looseObject({
  name: z.string().min(1).max(80),
  enabled: z.boolean().optional(),
  match: z.unknown().optional(),
  conditions: z.unknown(),
  strategy: z.enum(ROUTE_STRATEGIES).optional(),
  fallthrough: z.boolean().optional(),
  targets: targetsField,
});

const failoverField = z.partialRecord(z.enum(FAILURE_KINDS), z.enum(FAILOVER_ACTIONS));

const settable = {
  name: nameField,
  description: z.string().max(500).nullable(),
  strategy: z.enum(ROUTE_STRATEGIES),
  ...environmentFields,
  timeout_ms: timeoutMsField.nullable(),
  max_retries: z.number().int().min(0).max(3),
  targets: targetsField,
  rules: z.array(ruleSchema).max(MAX_ROUTE_RULES),
  failover: failoverField,
  batch_mode: z.enum(BATCH_MODES).describe('How a batch naming this route runs (an extension): `native` on the first target\'s provider batch API where it has one (OpenAI, Azure OpenAI, Anthropic; half the price), `gateway` always through the gateway\'s own request path.'),
};

const createSchema = z.strictObject({ ...settable, slug: slugField }).partial().required({ slug: true, targets: true });
const patchSchema = z.strictObject(settable).partial();

const readSchema = z.object({
  slug: z.string(),
  name: z.string().nullable(),
  description: z.string().nullable(),
  strategy: z.enum(ROUTE_STRATEGIES),
  ...environmentsRead,
  timeout_ms: z.number().int().nullable(),
  max_retries: z.number().int(),
  targets: z.array(targetSchema),
  rules: z.array(ruleSchema),
  failover: z.record(z.enum(FAILURE_KINDS), z.enum(FAILOVER_ACTIONS)).describe('Every failure kind; kinds never set read as `retry`.'),
  batch_mode: z.enum(BATCH_MODES),
  created_at: unixTime,
  updated_at: unixTime,
});

/** Every target, top-level and in rules, must name a live connection of the organization. */
async function checkTargets(db: Executor, orgId: string, targets: RouteTarget[]): Promise<void> {
  const ids = [...new Set(targets.map((t) => t.connection_id))];
  if (ids.length === 0) return;
  const found = await db.select({ id: providerConnections.id }).from(providerConnections)
    .where(and(eq(providerConnections.orgId, orgId), inArray(providerConnections.id, ids), isNull(providerConnections.deletedAt)));
  const missing = ids.find((id) => !found.some((f) => f.id === id));
  if (missing) throw new GatewayError('invalid_request', `Invalid \`targets\`: no provider connection \`${missing}\`.`);
}

function allTargets(input: { targets?: RouteTarget[]; rules?: { targets: RouteTarget[] }[] }): RouteTarget[] {
  return [...(input.targets ?? []), ...(input.rules ?? []).flatMap((r) => r.targets)];
}

async function findRoute(db: Executor, orgId: string, id: string, forUpdate: boolean): Promise<RouteRow | null> {
  const query = db.select().from(routes).where(and(eq(routes.orgId, orgId), eq(routes.id, id), isNull(routes.deletedAt)));
  return selectOne(query, forUpdate);
}

export const routesResource: ResourceType<RouteRow> = {
  type: 'routes',
  object: 'route',
  scope: 'routes',
  table: routes,
  readSchema,
  createSchema,
  patchSchema,

  find: (db, orgId, id, { forUpdate }) => findRoute(db, orgId, id, forUpdate),

  list(db, principal, page) {
    return newestFirst(db, routes, and(eq(routes.orgId, principal.orgId), isNull(routes.deletedAt)), page);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const orgId = call.principal.orgId;
    await checkTargets(call.db, orgId, allTargets(input));
    const environments = (await resolveEnvironments(call.db, orgId, input)) ?? [];
    const [row] = await call.db.insert(routes).values({
      id: newId('route'),
      orgId,
      slug: input.slug,
      name: input.name ?? null,
      description: input.description ?? null,
      strategy: input.strategy ?? 'priority',
      environments,
      timeoutMs: input.timeout_ms ?? null,
      maxRetries: input.max_retries ?? 1,
      targets: input.targets,
      rules: (input.rules ?? []) as never,
      failover: input.failover ?? {},
      batchMode: input.batch_mode ?? 'native',
    }).returning();
    return { row: row! };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    await checkTargets(call.db, row.orgId, allTargets(input));
    const environments = await resolveEnvironments(call.db, row.orgId, input);
    return {
      ...(input.name !== undefined && { name: input.name }),
      ...(input.description !== undefined && { description: input.description }),
      ...(input.strategy !== undefined && { strategy: input.strategy }),
      ...(environments !== undefined && { environments }),
      ...(input.timeout_ms !== undefined && { timeoutMs: input.timeout_ms }),
      ...(input.max_retries !== undefined && { maxRetries: input.max_retries }),
      ...(input.targets !== undefined && { targets: input.targets }),
      ...(input.rules !== undefined && { rules: input.rules }),
      // Omitted kinds keep `retry`: a patch's map replaces the stored one.
      ...(input.failover !== undefined && { failover: input.failover }),
      ...(input.batch_mode !== undefined && { batchMode: input.batch_mode }),
    };
  },

  async remove(call) {
    return { hide: { deletedAt: call.now } };
  },

  uniqueConflict: (constraint) =>
    constraint === 'routes_org_slug' ? new GatewayError('invalid_request', 'Invalid `slug`: another route already uses it.') : undefined,

  present: (row) => ({
    slug: row.slug,
    name: row.name,
    description: row.description,
    strategy: row.strategy,
    ...presentEnvironments(row.environments),
    timeout_ms: row.timeoutMs,
    max_retries: row.maxRetries,
    targets: row.targets,
    rules: row.rules,
    failover: fullFailover(row.failover),
    batch_mode: row.batchMode,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
