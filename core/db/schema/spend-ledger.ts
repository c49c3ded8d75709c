import { index, jsonb, numeric, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

export const SPEND_STATES = ['reserved', 'settled', 'released'] as const;

/**
 * The spend ledger: every priced request's settled cost (chat rows written in batches off the
 * hot path; a job's row reserved at submit, settled on success, released on failure or
 * cancel), with each budget scope it counts against, so Redis counters can be rebuilt from it.
 * Keyed by the key lineage, so a rotated key keeps its spend.
 */
export const spendLedger = pgTable(
  'spend_ledger',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    lineageId: text('lineage_id').notNull(),
    projectId: text('project_id').notNull(),
    jobId: text('job_id'),
    /** The chat request it settles (null for jobs). */
    requestId: text('request_id'),
    /** The member who created the key: their budget counts this spend. */
    memberId: text('member_id'),
    /** The end customer (`metadata.user_id`), when the request named one. */
    endUserId: text('end_user_id'),
    /** `<cap rule id>:<end customer>`: the counter it settled into (customers are capped per rule). */
    endUserScope: text('end_user_scope'),
    /** A job's Redis hold: the budget windows its estimate is held in, to settle or release at its end. */
    holdWindows: jsonb('hold_windows').$type<Array<{
      orgId: string; scope: string; window: string; limitNanos: number | null; ttlSeconds: number;
      limit?: number | null; alertAt?: number[]; behavior?: 'block' | 'alert';
    }>>(),
    /** The provider kind and the model it served (a snapshot name as the provider answered it): what commitments match on, through the catalogue's canonical model. */
    provider: text('provider'),
    model: text('model'),
    /**
     * A chat request drawn from an API process's spend lease: the lease and the step after which
     * it settled (`<lease id>#<step>`). A lapsed lease's row (its `request_id` the lease id)
     * carries its last step's: the requests that settled after that step are what the lapse
     * counted in full, so a rebuild counts the larger of the two (core/spend/ledger.ts).
     */
    leaseRef: text('lease_ref'),
    amount: numeric('amount', { mode: 'number' }).notNull(),
    state: text('state', { enum: SPEND_STATES }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('spend_ledger_lineage').on(t.lineageId, t.createdAt),
    uniqueIndex('spend_ledger_job').on(t.jobId),
    index('spend_ledger_org').on(t.orgId, t.createdAt),
    index('spend_ledger_project').on(t.projectId, t.createdAt),
  ],
);
