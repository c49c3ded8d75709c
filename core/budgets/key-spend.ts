import type { KeyContext } from '../auth/gateway-key-auth';
import type { CreditLimit } from '../db/schema';
import { GatewayError } from '../errors';
import type { RedisHandle } from '../redis';
import { periodStart } from './periods';

/**
 * Spend per key lineage, kept in Redis so the hot path reads it in one round trip: a lifetime
 * total and one bucket per UTC day (kept 40 days). A period's spend is the sum of its days, so
 * a key may change its period or an organization its billing day without losing anything.
 * Amounts are micro-dollars, counted as integers so sums never drift.
 */
const DAY_MS = 86_400_000;
const BUCKET_TTL_SECONDS = 40 * 86_400;

const dayKey = (lineageId: string, day: Date) => `spend:${lineageId}:${day.toISOString().slice(0, 10)}`;
const lifetimeKey = (lineageId: string) => `spend:${lineageId}:lifetime`;
const micro = (dollars: number) => Math.round(dollars * 1e6);

function daysSince(start: Date, now: Date): Date[] {
  const days: Date[] = [];
  for (let t = Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate()); t <= now.getTime(); t += DAY_MS) days.push(new Date(t));
  return days;
}

export type KeySpend = { limit: number | null; usage: number; period: CreditLimit['period'] | null; resetsAt: Date | null };

/** What the key has spent against its limit now (spec 2.5): in the period, or lifetime without a limit or for `never`. */
export async function keySpend(redis: RedisHandle, key: Pick<KeyContext, 'lineageId' | 'creditLimit'>, now: Date, billingDay: number): Promise<KeySpend> {
  const limit = key.creditLimit;
  if (!limit || limit.period === 'never') {
    const total = Number((await redis.redis.get(lifetimeKey(key.lineageId))) ?? 0) / 1e6;
    return { limit: limit?.amount ?? null, usage: total, period: limit ? 'never' : null, resetsAt: null };
  }
  const start = periodStart(limit.period, now, billingDay);
  const values = await redis.redis.mget(daysSince(start, now).map((d) => dayKey(key.lineageId, d)));
  const usage = values.reduce((sum, v) => sum + Number(v ?? 0), 0) / 1e6;
  return { limit: limit.amount, usage, period: limit.period, resetsAt: nextReset(limit.period, start) };
}

function nextReset(period: 'daily' | 'weekly' | 'monthly', start: Date): Date {
  if (period === 'daily') return new Date(start.getTime() + DAY_MS);
  if (period === 'weekly') return new Date(start.getTime() + 7 * DAY_MS);
  return new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, start.getUTCDate()));
}

/** Spec 8 rule 1: once the key's limit is used up, every request is 402 until it resets or is raised. */
export async function checkKeyBudget(redis: RedisHandle, key: KeyContext, now: Date, billingDay: number): Promise<void> {
  if (!key.creditLimit) return;
  const spend = await keySpend(redis, key, now, billingDay);
  if (spend.usage >= key.creditLimit.amount) {
    const lifetime = key.creditLimit.period === 'never';
    throw new GatewayError(lifetime ? 'key_lifetime_limit' : 'key_budget', `This key's ${lifetime ? 'lifetime' : key.creditLimit.period} spend limit of $${key.creditLimit.amount} is used up.`);
  }
}

/** Adds a settled cost to the key lineage's day and lifetime totals. */
export async function recordKeySpend(redis: RedisHandle, lineageId: string, dollars: number, now: Date): Promise<void> {
  const amount = micro(dollars);
  if (amount <= 0) return;
  const day = dayKey(lineageId, now);
  await redis.redis.multi().incrby(day, amount).expire(day, BUCKET_TTL_SECONDS).incrby(lifetimeKey(lineageId), amount).exec();
}
