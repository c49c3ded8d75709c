import { boolean, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { members, organizations } from './organizations';
import type { GuardrailPolicy } from './guardrail-policy';
import { projects } from './projects';

import { DEFAULT_RATE_LIMIT_RPM } from '../../ratelimit/tiers';
export { DEFAULT_RATE_LIMIT_RPM, RATE_LIMIT_TIERS } from '../../ratelimit/tiers';
export const CREDIT_PERIODS = ['daily', 'weekly', 'monthly', 'never'] as const;
export const OBSERVABILITY_ACCESS = ['none', 'scoped', 'organization'] as const;

export type CreditLimit = { amount: number; period: (typeof CREDIT_PERIODS)[number] };

export const gatewayKeys = pgTable(
  'gateway_keys',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    projectId: text('project_id').notNull().references(() => projects.id),
    label: text('label').notNull(),
    /** SHA-256 of the secret; the secret is shown once and never stored. */
    secretHash: text('secret_hash').notNull().unique(),
    secretPrefix: text('secret_prefix').notNull(),
    /** Shared by a key and every key rotated from it: spend limits and grants follow the lineage. */
    lineageId: text('lineage_id').notNull(),
    creditLimit: jsonb('credit_limit').$type<CreditLimit | null>(),
    /**
     * When `credit_limit`'s period last changed (null: never since the key was made). Part of the
     * key scope's window id, so the counters of the new period start from the ledger, never from
     * a window an earlier period left in Redis (issue 54).
     */
    creditPeriodSince: timestamp('credit_period_since', { withTimezone: true }),
    rateLimitRpm: integer('rate_limit_rpm').notNull().default(DEFAULT_RATE_LIMIT_RPM),
    modelAllowlist: text('model_allowlist').array().notNull().default([]),
    allowedRoutes: text('allowed_routes').array().notNull().default([]),
    allowedProviders: text('allowed_providers').array().notNull().default([]),
    environment: text('environment'),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    observabilityAccess: text('observability_access', { enum: OBSERVABILITY_ACCESS }).notNull().default('none'),
    payloadAccess: boolean('payload_access').notNull().default(false),
    disabled: boolean('disabled').notNull().default(false),
    /** Canonical CIDR ranges (`1.2.3.4/32`); empty accepts any address. */
    allowedIps: text('allowed_ips').array().notNull().default([]),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
    rotatedFromKeyId: text('rotated_from_key_id'),
    createdByMemberId: text('created_by_member_id').references(() => members.id),
    guardrailPolicy: jsonb('guardrail_policy').$type<GuardrailPolicy | null>(),
    ...resourceColumns(),
  },
  (t) => [index('gateway_keys_org_project').on(t.orgId, t.projectId), index('gateway_keys_lineage').on(t.lineageId),
    // A key is rotated at most once: its one successor names it here.
    uniqueIndex('gateway_keys_rotated_from').on(t.rotatedFromKeyId),
  ],
);
