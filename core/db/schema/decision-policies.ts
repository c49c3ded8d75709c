import { boolean, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';

/**
 * A decision policy (issue 24): a named question a key may ask at `POST /v1/decisions/{slug}`,
 * answered by a model as JSON valid against `output_schema` within `deadline_ms`, or by
 * `fallback` when the model is too slow, wrong or unreachable. `fallback` null means none.
 */
export const decisionPolicies = pgTable(
  'decision_policies',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    slug: text('slug').notNull(),
    name: text('name').notNull(),
    description: text('description'),
    enabled: boolean('enabled').notNull().default(true),
    /** A route slug or a model id, resolved as chat resolves `model`. */
    model: text('model').notNull(),
    instructions: text('instructions').notNull().default(''),
    outputSchema: jsonb('output_schema').$type<Record<string, unknown>>().notNull(),
    deadlineMs: integer('deadline_ms').notNull(),
    fallback: jsonb('fallback').$type<Record<string, unknown> | null>(),
    /** Projects whose keys may call it; empty means every project. */
    projectIds: text('project_ids').array().notNull().default([]),
    maxTokens: integer('max_tokens'),
    ...resourceColumns(),
  },
  (t) => [
    uniqueIndex('decision_policies_org_slug').on(t.orgId, t.slug),
    index('decision_policies_org_created').on(t.orgId, t.createdAt, t.id),
  ],
);

export type DecisionPolicyRow = typeof decisionPolicies.$inferSelect;
