import { boolean, integer, jsonb, numeric, pgTable, text } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { members, organizations } from './organizations';
import type { SpendLimit } from './projects';
import { DEFAULT_RESPONSE_CACHE, type GuardrailPolicy, type ResponseCacheSettings } from './guardrail-policy';

export const UNPRICED_BUDGET_POLICIES = ['block', 'allow'] as const;

/** Days prompts and answers are kept (request-log bodies, kept Responses) when an organization has no settings row: the column's default. */
export const DEFAULT_PROMPT_RETENTION_DAYS = 30;

/** The organization's single settings object; `id` is the organization's id. */
export const orgSettings = pgTable('org_settings', {
  id: text('id').primaryKey().references(() => organizations.id, { onDelete: 'cascade' }),
  orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  monthlyTarget: numeric('monthly_target', { mode: 'number' }),
  hardCap: jsonb('hard_cap').$type<SpendLimit | null>(),
  unpricedBudgetPolicy: text('unpriced_budget_policy', { enum: UNPRICED_BUDGET_POLICIES }).notNull().default('block'),
  promptLoggingEnabled: boolean('prompt_logging_enabled').notNull().default(false),
  promptLoggingRetentionDays: integer('prompt_logging_retention_days').notNull().default(DEFAULT_PROMPT_RETENTION_DAYS),
  modelAllowlist: text('model_allowlist').array().notNull().default([]),
  billingDayOfMonth: integer('billing_day_of_month').notNull().default(1),
  responseCache: jsonb('response_cache').$type<ResponseCacheSettings>().notNull().default(DEFAULT_RESPONSE_CACHE),
  guardrailPolicy: jsonb('guardrail_policy').$type<GuardrailPolicy | null>(),
  /** Tool-gateway (assistant) access; false refuses MCP with `mcp_disabled` (issue 15). */
  mcpEnabled: boolean('mcp_enabled').notNull().default(true),
  /** `spend.anomaly` fires only on at least this many dollars above the usual hour (issue 22). */
  anomalyDollarFloor: numeric('anomaly_dollar_floor', { mode: 'number' }).notNull().default(5),
  ...resourceColumns(),
});

/** One spend limit per member; `id` is the member's id. Rows appear on first read. */
export const memberBudgets = pgTable('member_budgets', {
  id: text('id').primaryKey().references(() => members.id, { onDelete: 'cascade' }),
  orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
  spendLimit: jsonb('spend_limit').$type<SpendLimit | null>(),
  ...resourceColumns(),
});
