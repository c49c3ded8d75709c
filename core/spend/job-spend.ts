import { and, eq, inArray } from 'drizzle-orm';
import type { RedisClient } from '../redis';
import type { Database, Executor } from '../db/client';
import { budgetCrossings, modelPrices, spendLedger } from '../db/schema';
import { GatewayError } from '../errors';
import { newId } from '../ids';
import videoListPrices from '../pricing/video-list-prices.json';
import { settleHold } from './holds';
import { crossingRows, JOB_HOLD_LEASE_MS, type SpendLedger } from './ledger';
import { toNanos } from './money';
import { anyBlocking, type SpendScope } from './scopes';

export type PerSecondPrice = { cost: number; source: 'custom_provider' | 'custom' | 'list' } | null;

type ListPrice = { provider: string; model: string; usd_per_second: number; source: string };
/** Published per-second list prices (dated, each row naming its page): no catalog lists video. */
const LIST_PRICES: ListPrice[] = videoListPrices.prices;

/** The vendor's published per-second rate for one of these names (`sora-2` or `openai/sora-2`). */
export function videoListPrice(kind: string, models: string[]): ListPrice | null {
  const names = models.map((m) => (m.startsWith(`${kind}/`) ? m.slice(kind.length + 1) : m));
  return LIST_PRICES.find((p) => p.provider === kind && names.includes(p.model)) ?? null;
}

const perSecond = (seconds: number, rate: number) => Math.round(seconds * rate * 1e9) / 1e9;

/**
 * A video's price: seconds times the customer's per-second rate (this provider's first, then
 * any provider's), else the provider's published list rate, else null (unpriced).
 */
export async function videoPrice(db: Executor, orgId: string, kind: string, models: string[], seconds: number): Promise<PerSecondPrice> {
  const rows = await db.select().from(modelPrices).where(and(eq(modelPrices.orgId, orgId), inArray(modelPrices.model, models)));
  const own = rows.find((p) => p.provider === kind && p.unit !== null);
  const entry = own ?? rows.find((p) => p.provider === null && p.unit !== null);
  if (entry) return { cost: perSecond(seconds, entry.unit!), source: own ? 'custom_provider' : 'custom' };
  const list = videoListPrice(kind, models);
  return list ? { cost: perSecond(seconds, list.usd_per_second), source: 'list' } : null;
}

export { JOB_HOLD_LEASE_MS } from './ledger';

/**
 * Reserves a job's estimated cost in every budget scope of its key (spec 8), through the same
 * spend ledger as chat: 402 with the code of a blocking scope without room, nothing held then.
 * An unpriced job under a blocking scope is refused (`unpriced_model_under_budget`) unless the
 * organization allows unpriced traffic. The job's ledger row records the hold's windows, so
 * the job's end settles or releases it (`endJobHold`).
 */
export async function reserveJobSpend(db: Database, spend: SpendLedger, input: {
  orgId: string; lineageId: string; projectId: string; memberId: string | null; jobId: string;
  /** The dearest priced candidate's cost (null: none is priced); `unpriced`: some candidate has no price. */
  estimate: number | null; unpriced: boolean;
  scopes: SpendScope[]; unpricedBudgetPolicy: 'block' | 'allow'; now: Date;
  /** How long the hold lasts unsettled (a native batch's runs as long as its window); JOB_HOLD_LEASE_MS by default. */
  leaseMs?: number;
}): Promise<void> {
  const blocking = anyBlocking(input.scopes);
  if (blocking && input.unpriced && input.unpricedBudgetPolicy !== 'allow') {
    throw new GatewayError('unpriced_model_under_budget', 'This model has no price, and a spend limit applies to this key; enter a rate or allow unpriced traffic.');
  }
  if (blocking) await spend.reserve({ holdId: input.jobId, scopes: input.scopes, amount: input.estimate ?? 0, leaseMs: input.leaseMs ?? JOB_HOLD_LEASE_MS, now: input.now });
  try {
    await db.insert(spendLedger).values({
      id: newId('spend'), orgId: input.orgId, lineageId: input.lineageId, projectId: input.projectId, memberId: input.memberId, jobId: input.jobId,
      amount: input.estimate ?? 0, state: 'reserved', createdAt: input.now, updatedAt: input.now,
      holdWindows: input.scopes.map(({ orgId, scope, window, limitNanos, ttlSeconds, limit, alertAt, behavior }) => ({ orgId, scope, window, limitNanos, ttlSeconds, limit, alertAt, behavior })),
    });
  } catch (err) {
    if (blocking) await spend.release({ id: input.jobId, scopes: input.scopes, amount: input.estimate ?? 0 });
    throw err;
  }
}

/**
 * Ends a job's Redis hold as its ledger row now says: the settled cost joins every window it
 * was held in, a released row gives the hold back. Call it once, after the move that closed
 * the row committed.
 */
export async function endJobHold(db: Executor, redis: RedisClient, jobId: string): Promise<void> {
  const [row] = await db.select().from(spendLedger).where(eq(spendLedger.jobId, jobId));
  if (!row?.holdWindows || row.state === 'reserved') return;
  const nanos = row.state === 'settled' ? toNanos(Number(row.amount)) : 0;
  const totals = await settleHold(redis, jobId, row.holdWindows, nanos);
  const scopes = row.holdWindows.map((w) => Object.assign({}, w, { limit: w.limit ?? null, alertAt: w.alertAt ?? [], behavior: w.behavior ?? 'alert' }));
  const crossings = crossingRows(scopes, totals, nanos, new Date());
  if (crossings.length > 0) await db.insert(budgetCrossings).values(crossings).onConflictDoNothing();
}

/**
 * Success: the reservation becomes the actual cost. `held`: the provider may bill a render whose
 * end was not seen (core/jobs/job-store.ts), so the reservation is settled as it stands.
 * Otherwise it is released.
 */
export type JobSpendOutcome =
  | { cost: number | null; provider: string | null; model: string }
  | { held: true; provider: string | null; model: string }
  | 'released';

export async function closeJobSpend(db: Executor, jobId: string, outcome: JobSpendOutcome, now: Date): Promise<void> {
  const changes = outcome === 'released' ? { state: 'released' as const, updatedAt: now }
    : 'held' in outcome ? { state: 'settled' as const, provider: outcome.provider, model: outcome.model, updatedAt: now }
      : { state: 'settled' as const, amount: outcome.cost ?? 0, provider: outcome.provider, model: outcome.model, updatedAt: now };
  await db.update(spendLedger).set(changes).where(and(eq(spendLedger.jobId, jobId), eq(spendLedger.state, 'reserved')));
}
