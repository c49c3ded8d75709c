import type { CacheWrites, Usage } from '../providers/types';
import type { PriceEntry } from '../routing/org-config';
import { resolvedPrice, type PriceQuery, type ResolvedPrice } from './resolved-price';

export const PRICE_SOURCES = ['provider', 'custom_provider', 'custom', 'list', 'gateway_cache'] as const;
export type PriceSource = (typeof PRICE_SOURCES)[number];

export type CostEstimate = { cost: number; source: PriceSource } | null;

/** Sums of dollars are rounded to a nano-dollar: no float noise like 0.30000000000000004. */
function dollars(value: number): number {
  return Math.round(value * 1e9) / 1e9;
}

/**
 * What a prompt-cache write costs per input token (Anthropic's published multipliers, the only
 * provider that reports writes): 1.25x for a 5-minute entry, 2x for a 1-hour one. Used with a
 * customer's own input rate, which has no write rate of its own; list prices carry their own.
 */
export const CACHE_WRITE_5M_MULTIPLIER = 1.25;
export const CACHE_WRITE_1H_MULTIPLIER = 2;

/** Dollars at the customer's per-million rates; cached input at its own rate, else the input rate; cache writes at the input rate's multiples. */
function customCost(entry: PriceEntry, promptTokens: number, cachedTokens: number, completionTokens: number, writes?: CacheWrites): number {
  const input = entry.inputPerMillion ?? 0;
  const cachedRate = entry.cachedInputPerMillion ?? input;
  const hour = writes?.ttl_1h ?? 0;
  const minutes = (writes?.total ?? 0) - hour;
  const written = input * (minutes * CACHE_WRITE_5M_MULTIPLIER + hour * CACHE_WRITE_1H_MULTIPLIER);
  return dollars(((promptTokens - cachedTokens - (writes?.total ?? 0)) * input + cachedTokens * cachedRate + written + completionTokens * (entry.outputPerMillion ?? 0)) / 1e6);
}

/** The cost of these token counts at a resolved price; null when unpriced. `writes`: prompt-cache writes inside the prompt tokens. */
export function costAt(price: ResolvedPrice, promptTokens: number, cachedTokens: number, completionTokens: number, writes?: CacheWrites): CostEstimate {
  switch (price.source) {
    case 'none':
      return null;
    case 'list':
      return { cost: dollars(price.list.cost(promptTokens, cachedTokens, completionTokens, writes)), source: 'list' };
    default:
      return { cost: customCost(price.rates, promptTokens, cachedTokens, completionTokens, writes), source: price.source };
  }
}

/**
 * What the provider will likely bill, by the first source that knows (spec 2.2): the
 * provider's own figure, the customer's rate for this provider, the customer's rate for the
 * model, the vendor's list price. Null when none does: unpriced, which is not free. Reasoning
 * tokens are inside completion tokens and priced with them; cached input at its own rate.
 * The source and rates are resolved once per model under the organization's rates
 * (`resolvedPrice`), not looked up per request.
 */
export function estimateCost(input: PriceQuery & { usage: Usage | null }): CostEstimate {
  const { usage } = input;
  if (!usage) return null;
  if (typeof usage.provider_cost === 'number') return { cost: dollars(usage.provider_cost), source: 'provider' };
  return costAt(resolvedPrice(input), usage.prompt_tokens, usage.prompt_tokens_details?.cached_tokens ?? 0, usage.completion_tokens, usage.cache_write_tokens);
}

/** Whether any source could price this model (before a request: usage unknown yet). */
export function hasPrice(input: PriceQuery): boolean {
  return resolvedPrice(input).source !== 'none';
}
