import { sql } from 'drizzle-orm';
import { pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const PLANS = ['trial', 'team', 'business'] as const;
export type Plan = (typeof PLANS)[number];

/**
 * Whether the organization may send traffic. `grace` is the three days after a failed trial
 * charge; past it the state becomes `trial_payment_failed`. `lapsed` has no subscription.
 */
export const ENTITLEMENT_STATES = ['trialing', 'active', 'grace', 'trial_payment_failed', 'lapsed', 'suspended'] as const;
export type EntitlementState = (typeof ENTITLEMENT_STATES)[number];

export const MEMBER_ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

export const DEFAULT_ENVIRONMENTS = ['production', 'staging', 'development'] as const;

export const organizations = pgTable('organizations', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  plan: text('plan', { enum: PLANS }).notNull().default('trial'),
  entitlementState: text('entitlement_state', { enum: ENTITLEMENT_STATES }).notNull().default('trialing'),
  supportEmail: text('support_email'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

export const environments = pgTable(
  'environments',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    /** The identifier keys, connections and routes name (`production`, ...). */
    slug: text('slug').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('environments_org_slug').on(t.orgId, t.slug)],
);

export const members = pgTable(
  'members',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    userId: text('user_id').notNull(),
    email: text('email').notNull(),
    role: text('role', { enum: MEMBER_ROLES }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('members_org_email').on(t.orgId, sql`lower(${t.email})`)],
);
