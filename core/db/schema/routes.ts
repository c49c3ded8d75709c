import { sql } from 'drizzle-orm';
import { integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';

export const ROUTE_STRATEGIES = ['priority', 'weighted'] as const;
import { FAILURE_KINDS } from '../../providers/types';

/** The spec's failure kinds (defined with the provider adapters that classify them). */
export { FAILURE_KINDS };
export const FAILOVER_ACTIONS = ['retry', 'failover', 'stop'] as const;

export type RouteTarget = { connection_id: string; model: string; weight?: number; enabled?: boolean };
export type RouteRule = {
  name: string;
  enabled?: boolean;
  match?: unknown;
  conditions: unknown;
  strategy?: (typeof ROUTE_STRATEGIES)[number];
  fallthrough?: boolean;
  targets: RouteTarget[];
};
export type FailoverPolicy = Partial<Record<(typeof FAILURE_KINDS)[number], (typeof FAILOVER_ACTIONS)[number]>>;

/** A named model applications send as `model`, resolved to ordered connection targets. */
/** How a route's batches run: on the provider's batch API where there is one, or always by the gateway. */
export const BATCH_MODES = ['native', 'gateway'] as const;

export const routes = pgTable(
  'routes',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    slug: text('slug').notNull(),
    name: text('name'),
    description: text('description'),
    strategy: text('strategy', { enum: ROUTE_STRATEGIES }).notNull().default('priority'),
    environments: text('environments').array().notNull().default([]),
    timeoutMs: integer('timeout_ms'),
    maxRetries: integer('max_retries').notNull().default(1),
    targets: jsonb('targets').$type<RouteTarget[]>().notNull(),
    rules: jsonb('rules').$type<RouteRule[]>().notNull().default([]),
    /** Only the kinds set explicitly; reads fill the rest with `retry`. */
    failover: jsonb('failover').$type<FailoverPolicy>().notNull().default({}),
    /**
     * How a batch of this route's model runs (issue 56, an extension): `native` on the first
     * target's provider batch API where it has one, `gateway` always by the gateway itself.
     */
    batchMode: text('batch_mode', { enum: BATCH_MODES }).notNull().default('native'),
    deletedAt: timestamp('deleted_at', { withTimezone: true }),
    ...resourceColumns(),
  },
  (t) => [uniqueIndex('routes_org_slug').on(t.orgId, t.slug).where(sql`${t.deletedAt} is null`)],
);
