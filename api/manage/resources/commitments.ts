import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { commitmentFigures, commitmentSpend, type CommitmentFigures } from '../../../core/attribution/commitment-figures';
import type { Executor } from '../../../core/db/client';
import { commitments, type CommitmentRow } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { toInstant } from '../../../core/observability/instant';
import { PROVIDER_KINDS } from '../../../core/providers/kinds';
import { nameField, unixTime } from './fields';
import { newestFirst, selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

/** A commitment as reads answer it: its row and the figures computed at the read. */
type Commitment = CommitmentRow & { figures: CommitmentFigures };

/** An instant in a body: Unix seconds, or ISO 8601. */
const instant = z.union([z.number().int().nonnegative(), z.string().min(1).max(64)]).transform((value, ctx) => {
  const at = typeof value === 'number' ? new Date(value * 1000) : toInstant(value);
  if (!at) {
    ctx.addIssue({ code: 'custom', message: 'expected Unix seconds or an ISO 8601 time' });
    return z.NEVER;
  }
  return at;
});

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
/**
 * A period's end: an instant, or a date (`2026-12-31`) meaning that whole day, so up to the
 * start of the next UTC day. A contract that runs "to December 31" includes the 31st.
 */
const periodEnd = z.union([z.number().int().nonnegative(), z.string().min(1).max(64)]).transform((value, ctx) => {
  if (typeof value === 'string' && DATE_ONLY.test(value)) {
    const day = toInstant(value);
    if (day) return new Date(day.getTime() + 86_400_000);
  }
  const at = typeof value === 'number' ? new Date(value * 1000) : toInstant(value);
  if (!at) {
    ctx.addIssue({ code: 'custom', message: 'expected Unix seconds, an ISO 8601 time, or a date (that whole day)' });
    return z.NEVER;
  }
  return at;
});

const fields = {
  provider_kind: z.enum(PROVIDER_KINDS),
  label: nameField,
  amount_usd: z.number().positive().max(1_000_000_000),
  period_start: instant,
  period_end: periodEnd,
  discount_pct: z.number().min(0).max(100).nullable(),
  models: z.array(z.string().min(1).max(200)).max(200).nullable().describe('Which models count; absent or null: every model of the kind.'),
  notes: z.string().max(2000).nullable(),
};
const createSchema = z.strictObject({
  provider_kind: fields.provider_kind, label: fields.label, amount_usd: fields.amount_usd, period_start: fields.period_start, period_end: fields.period_end,
  discount_pct: fields.discount_pct.optional(), models: fields.models.optional(), notes: fields.notes.optional(),
});
const patchSchema = z.strictObject(fields).partial();

function checkPeriod(start: Date, end: Date): void {
  if (end.getTime() <= start.getTime()) throw new GatewayError('invalid_request', 'Invalid `period_end`: it must come after `period_start`.');
}

async function withFigures(db: Executor, row: CommitmentRow | null): Promise<Commitment | null> {
  if (!row) return null;
  const now = new Date();
  return Object.assign(row, { figures: commitmentFigures(row, await commitmentSpend(db, row, now), now) });
}

/** Provider commitments (spec 2.6, issue 23): all patchable, delete removes; reads add their burn-down. */
export const commitmentsResource: ResourceType<Commitment> = {
  type: 'commitments',
  object: 'commitment',
  scope: 'costs',
  table: commitments,
  readSchema: z.object({
    provider_kind: z.enum(PROVIDER_KINDS),
    label: z.string(),
    amount_usd: z.number(),
    period_start: unixTime,
    period_end: unixTime,
    discount_pct: z.number().nullable(),
    models: z.array(z.string()).nullable(),
    notes: z.string().nullable(),
    consumed_usd: z.number().describe('Settled spend (spend ledger, chat and video) in the period on this provider kind and these models (a snapshot name counts as its model), after `discount_pct`.'),
    remaining_usd: z.number(),
    burn_rate_usd_per_day: z.number().describe('Over the trailing 7 days of the period.'),
    projected_exhaustion_at: unixTime.nullable().describe('When the remaining amount runs out at the burn rate, if before `period_end`; when it already ran out, when it did (about).'),
    exhausted: z.boolean().describe('Whether what was consumed has reached `amount_usd`.'),
    projected_unused_usd: z.number().describe('What would be left at `period_end` at the burn rate.'),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    const row = await selectOne(db.select().from(commitments).where(and(eq(commitments.orgId, orgId), eq(commitments.id, id))), forUpdate);
    return withFigures(db, row);
  },

  async list(db, principal, page) {
    const listed = await newestFirst<CommitmentRow>(db, commitments, eq(commitments.orgId, principal.orgId), page);
    return Promise.all(listed.map(async (l) => ({ row: (await withFigures(db, l.row))!, cursor: l.cursor })));
  },

  async create(call, input: z.infer<typeof createSchema>) {
    checkPeriod(input.period_start, input.period_end);
    const [row] = await call.db.insert(commitments).values({
      id: newId('cmt'), orgId: call.principal.orgId, providerKind: input.provider_kind, label: input.label, amountUsd: input.amount_usd,
      periodStart: input.period_start, periodEnd: input.period_end, discountPct: input.discount_pct ?? null,
      models: input.models && input.models.length > 0 ? [...new Set(input.models)] : null, notes: input.notes ?? null,
    }).returning();
    return { row: (await withFigures(call.db, row!))! };
  },

  async patch(_call, row, input: z.infer<typeof patchSchema>) {
    checkPeriod(input.period_start ?? row.periodStart, input.period_end ?? row.periodEnd);
    return {
      ...(input.provider_kind !== undefined && { providerKind: input.provider_kind }),
      ...(input.label !== undefined && { label: input.label }),
      ...(input.amount_usd !== undefined && { amountUsd: input.amount_usd }),
      ...(input.period_start !== undefined && { periodStart: input.period_start }),
      ...(input.period_end !== undefined && { periodEnd: input.period_end }),
      ...(input.discount_pct !== undefined && { discountPct: input.discount_pct }),
      ...(input.models !== undefined && { models: input.models && input.models.length > 0 ? [...new Set(input.models)] : null }),
      ...(input.notes !== undefined && { notes: input.notes }),
    };
  },

  async remove() {
    return 'delete';
  },

  present: (row) => ({
    provider_kind: row.providerKind as (typeof PROVIDER_KINDS)[number],
    label: row.label,
    amount_usd: row.amountUsd,
    period_start: unix(row.periodStart),
    period_end: unix(row.periodEnd),
    discount_pct: row.discountPct,
    models: row.models,
    notes: row.notes,
    consumed_usd: row.figures.consumed_usd,
    remaining_usd: row.figures.remaining_usd,
    burn_rate_usd_per_day: row.figures.burn_rate_usd_per_day,
    projected_exhaustion_at: unix(row.figures.projected_exhaustion_at),
    exhausted: row.figures.exhausted,
    projected_unused_usd: row.figures.projected_unused_usd,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
