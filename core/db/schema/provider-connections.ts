import { sql } from 'drizzle-orm';
import { index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';

export const CONNECTION_STATUSES = ['enabled', 'disabled'] as const;
export const POOL_ROLES = ['active', 'standby'] as const;

/**
 * A provider account the customer connected with their own credential. The credential and
 * its pooled fallbacks are sealed (core/crypto/sealing.ts); nothing here is readable as text.
 */
export const providerConnections = pgTable(
  'provider_connections',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    kind: text('kind').notNull(),
    name: text('name').notNull(),
    /** The name folded for uniqueness: lower case, runs of spaces collapsed, trimmed. */
    nameKey: text('name_key').notNull(),
    /**
     * Null once the connection was pointed at another host the customer typed: a credential is
     * never sent to a host it was not given for (issue 20). The connection serves nothing until
     * `POST /provider_connections/{id}/credential` gives one again.
     */
    secretSealed: text('secret_sealed'),
    /** A sealed JSON array of further credentials, or null when there are none. */
    fallbackSecretsSealed: text('fallback_secrets_sealed'),
    fallbackSecretCount: integer('fallback_secret_count').notNull().default(0),
    /** Empty means every environment, including keys with none. */
    environments: text('environments').array().notNull().default([]),
    config: jsonb('config').$type<Record<string, unknown>>().notNull().default({}),
    modelMap: jsonb('model_map').$type<Record<string, string>>().notNull().default({}),
    timeoutMs: integer('timeout_ms'),
    alternateBaseUrls: text('alternate_base_urls').array().notNull().default([]),
    poolRole: text('pool_role', { enum: POOL_ROLES }).notNull().default('active'),
    status: text('status', { enum: CONNECTION_STATUSES }).notNull().default('enabled'),
    credentialUpdatedAt: timestamp('credential_updated_at', { withTimezone: true }).notNull().defaultNow(),
    deletedAt: timestamp('deleted_at', { withTimezone: true }),
    ...resourceColumns(),
  },
  (t) => [
    uniqueIndex('provider_connections_org_kind_name').on(t.orgId, t.kind, t.nameKey).where(sql`${t.deletedAt} is null`),
    index('provider_connections_org').on(t.orgId),
  ],
);
