import { and, eq, gte, inArray, sql } from 'drizzle-orm';
import type { Database, Executor } from '../db/client';
import { modelPrices, orgSettings, requestLogs, spendLedger, type CreditLimit } from '../db/schema';
import { GatewayError } from '../errors';
import { newId } from '../ids';
import videoListPrices from '../pricing/video-list-prices.json';
import { periodStart } from './periods';

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

/**
 * Reserves a job's estimated cost against its key's credit limit (spec 8): refused with 402
 * `key_budget` (`key_lifetime_limit` for `never`) when the period's spend (settled jobs,
 * reservations and logged requests of the key lineage) plus the estimate would pass the limit.
 * An unpriced job under a limit is refused (`unpriced_model_under_budget`) unless the
 * organization allows unpriced traffic. Serialized per lineage so two submits cannot both fit.
 */
export async function reserveJobSpend(db: Database, input: {
  orgId: string; lineageId: string; projectId: string; jobId: string; estimate: number | null; creditLimit: CreditLimit | null; now: Date;
}): Promise<void> {
  await db.transaction(async (tx) => {
    if (input.creditLimit) {
      await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${input.lineageId}))`);
      const [settings] = await tx.select().from(orgSettings).where(eq(orgSettings.id, input.orgId));
      if (input.estimate === null) {
        if (settings?.unpricedBudgetPolicy !== 'allow') {
          throw new GatewayError('unpriced_model_under_budget', 'This model has no price, and a spend limit applies to this key; enter a rate or allow unpriced traffic.');
        }
      } else {
        const since = periodStart(input.creditLimit.period, input.now, settings?.billingDayOfMonth ?? 1);
        const [jobs] = await tx.select({ n: sql<string>`coalesce(sum(${spendLedger.amount}), 0)` }).from(spendLedger)
          .where(and(eq(spendLedger.lineageId, input.lineageId), inArray(spendLedger.state, ['reserved', 'settled']), gte(spendLedger.createdAt, since)));
        const [requests] = await tx.select({ n: sql<string>`coalesce(sum(${requestLogs.cost}), 0)` }).from(requestLogs)
          .where(and(eq(requestLogs.orgId, input.orgId), sql`${requestLogs.keyId} in (select id from gateway_keys where lineage_id = ${input.lineageId})`, gte(requestLogs.createdAt, since)));
        const spent = Number(jobs?.n ?? 0) + Number(requests?.n ?? 0);
        if (spent + input.estimate > input.creditLimit.amount) {
          const code = input.creditLimit.period === 'never' ? 'key_lifetime_limit' : 'key_budget';
          throw new GatewayError(code, `This key's ${input.creditLimit.period === 'never' ? 'lifetime' : input.creditLimit.period} spend limit of $${input.creditLimit.amount} has no room for an estimated $${input.estimate}.`);
        }
      }
    }
    await tx.insert(spendLedger).values({ id: newId('spend'), orgId: input.orgId, lineageId: input.lineageId, projectId: input.projectId, jobId: input.jobId, amount: input.estimate ?? 0, state: 'reserved', createdAt: input.now, updatedAt: input.now });
  });
}

/** Success: the reservation becomes the actual cost. Failure or cancel: it is released. */
export async function closeJobSpend(db: Executor, jobId: string, outcome: { cost: number | null } | 'released', now: Date): Promise<void> {
  await db.update(spendLedger)
    .set(outcome === 'released' ? { state: 'released', updatedAt: now } : { state: 'settled', amount: outcome.cost ?? 0, updatedAt: now })
    .where(and(eq(spendLedger.jobId, jobId), eq(spendLedger.state, 'reserved')));
}
