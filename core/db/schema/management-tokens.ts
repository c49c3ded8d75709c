import { pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { members, organizations } from './organizations';

export const managementTokens = pgTable('management_tokens', {
  id: text('id').primaryKey(),
  orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  name: text('name').notNull(),
  /** SHA-256 of the token; the token itself is shown once and never stored. */
  tokenHash: text('token_hash').notNull().unique(),
  /** First characters of the token, so an operator can tell tokens apart. */
  tokenPrefix: text('token_prefix').notNull(),
  scopes: text('scopes').array().notNull(),
  /** When set, the token may touch only these projects' resources. */
  projectIds: text('project_ids').array(),
  /** Permissions follow the creator's *current* role (spec 5.6 insufficient_role). */
  createdByMemberId: text('created_by_member_id').notNull().references(() => members.id),
  expiresAt: timestamp('expires_at', { withTimezone: true }),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});
