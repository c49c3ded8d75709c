import { jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import type { GuardrailPolicy } from './guardrail-policy';
import { organizations } from './organizations';

export type SpendLimit = { monthly: number; behavior: 'alert' | 'block'; alert_at?: number[] };

export const projects = pgTable(
  'projects',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    slug: text('slug').notNull(),
    modelAllowlist: text('model_allowlist').array().notNull().default([]),
    spendLimit: jsonb('spend_limit').$type<SpendLimit | null>(),
    archivedAt: timestamp('archived_at', { withTimezone: true }),
    guardrailPolicy: jsonb('guardrail_policy').$type<GuardrailPolicy | null>(),
    ...resourceColumns(),
  },
  (t) => [uniqueIndex('projects_org_slug').on(t.orgId, t.slug)],
);
