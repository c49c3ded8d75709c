import type { ModelCatalog } from '../catalog/model-catalog';
import type { ProviderKind } from '../providers/kinds';
import type { Usage } from '../providers/types';
import type { PriceEntry } from '../routing/org-config';

export const PRICE_SOURCES = ['provider', 'custom_provider', 'custom', 'list', 'gateway_cache'] as const;
export type PriceSource = (typeof PRICE_SOURCES)[number];

export type CostEstimate = { cost: number; source: PriceSource } | null;

/** Sums of dollars are rounded to a nano-dollar: no float noise like 0.30000000000000004. */
function dollars(value: number): number {
  return Math.round(value * 1e9) / 1e9;
}

function customCost(entry: PriceEntry, usage: Usage): number | null {
  if (entry.inputPerMillion === null && entry.outputPerMillion === null) return null;
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  const input = entry.inputPerMillion ?? 0;
  const cachedRate = entry.cachedInputPerMillion ?? input;
  return dollars(((usage.prompt_tokens - cached) * input + cached * cachedRate + usage.completion_tokens * (entry.outputPerMillion ?? 0)) / 1e6);
}

/**
 * What the provider will likely bill, by the first source that knows (spec 2.2): the
 * provider's own figure, the customer's rate for this provider, the customer's rate for the
 * model, the vendor's list price. Null when none does: unpriced, which is not free. Reasoning
 * tokens are inside completion tokens and priced with them; cached input at its own rate.
 */
export function estimateCost(input: {
  usage: Usage | null;
  kind: ProviderKind;
  upstreamModel: string;
  modelId: string;
  prices: PriceEntry[];
  catalog: ModelCatalog;
}): CostEstimate {
  const { usage } = input;
  if (!usage) return null;
  if (typeof usage.provider_cost === 'number') return { cost: dollars(usage.provider_cost), source: 'provider' };
  const names = new Set([input.modelId, input.upstreamModel, input.modelId.slice(input.modelId.indexOf('/') + 1)]);
  const matching = input.prices.filter((p) => names.has(p.model));
  for (const [source, entry] of [
    ['custom_provider', matching.find((p) => p.provider === input.kind)],
    ['custom', matching.find((p) => p.provider === null)],
  ] as const) {
    const cost = entry ? customCost(entry, usage) : null;
    if (cost !== null) return { cost, source };
  }
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  const list = input.catalog.listPrice(input.kind, input.upstreamModel, { inputTokens: usage.prompt_tokens, cachedInputTokens: cached, outputTokens: usage.completion_tokens });
  return list === null ? null : { cost: dollars(list), source: 'list' };
}

/** Whether any source could price this model (before a request: usage unknown yet). */
export function hasPrice(input: { kind: ProviderKind; upstreamModel: string; modelId: string; prices: PriceEntry[]; catalog: ModelCatalog }): boolean {
  const names = new Set([input.modelId, input.upstreamModel, input.modelId.slice(input.modelId.indexOf('/') + 1)]);
  if (input.prices.some((p) => names.has(p.model) && (p.provider === null || p.provider === input.kind) && (p.inputPerMillion !== null || p.outputPerMillion !== null))) return true;
  return input.catalog.listPrice(input.kind, input.upstreamModel, { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1 }) !== null;
}
