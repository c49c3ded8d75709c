import type { Usage } from '../providers/types';
import type { PriceEntry } from '../routing/org-config';
import { resolvedPrice, type PriceQuery, type ResolvedPrice } from './resolved-price';

export const PRICE_SOURCES = ['provider', 'custom_provider', 'custom', 'list', 'gateway_cache'] as const;
export type PriceSource = (typeof PRICE_SOURCES)[number];

export type CostEstimate = { cost: number; source: PriceSource } | null;

/** Sums of dollars are rounded to a nano-dollar: no float noise like 0.30000000000000004. */
function dollars(value: number): number {
  return Math.round(value * 1e9) / 1e9;
}

/** Dollars at the customer's per-million rates; cached input at its own rate, else the input rate. */
function customCost(entry: PriceEntry, promptTokens: number, cachedTokens: number, completionTokens: number): number {
  const input = entry.inputPerMillion ?? 0;
  const cachedRate = entry.cachedInputPerMillion ?? input;
  return dollars(((promptTokens - cachedTokens) * input + cachedTokens * cachedRate + completionTokens * (entry.outputPerMillion ?? 0)) / 1e6);
}

/** The cost of these token counts at a resolved price; null when unpriced. */
export function costAt(price: ResolvedPrice, promptTokens: number, cachedTokens: number, completionTokens: number): CostEstimate {
  switch (price.source) {
    case 'none':
      return null;
    case 'list':
      return { cost: dollars(price.list.cost(promptTokens, cachedTokens, completionTokens)), source: 'list' };
    default:
      return { cost: customCost(price.rates, promptTokens, cachedTokens, completionTokens), source: price.source };
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
  return costAt(resolvedPrice(input), usage.prompt_tokens, usage.prompt_tokens_details?.cached_tokens ?? 0, usage.completion_tokens);
}

/** Whether any source could price this model (before a request: usage unknown yet). */
export function hasPrice(input: PriceQuery): boolean {
  return resolvedPrice(input).source !== 'none';
}
