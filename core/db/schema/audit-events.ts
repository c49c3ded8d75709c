import { index, integer, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

/** One row per management write. Sealed fields never reach `detail`. */
export const auditEvents = pgTable(
  'audit_events',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    actorTokenId: text('actor_token_id'),
    actorMemberId: text('actor_member_id'),
    /** `<resource_type>.<verb>`, e.g. `projects.create`, `gateway_keys.rotate`. */
    action: text('action').notNull(),
    resourceType: text('resource_type').notNull(),
    resourceId: text('resource_id').notNull(),
    /**
     * The project the write concerns (a key, a project, a project's cap rule or guardrail
     * policy); null for an organization-level write. A project-restricted token reads only rows
     * of its projects. No foreign key: a purged project's history stays.
     */
    projectId: text('project_id'),
    beforeVersion: integer('before_version'),
    afterVersion: integer('after_version'),
    detail: jsonb('detail').$type<Record<string, unknown>>(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('audit_events_org_created').on(t.orgId, t.createdAt), index('audit_events_org_project_created').on(t.orgId, t.projectId, t.createdAt)],
);
