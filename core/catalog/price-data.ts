import { calcPrice } from '@pydantic/genai-prices';
import { boundedCache } from '../bounded-cache';
import type { ProviderKind } from '../providers/kinds';
import { PRICE_PROVIDER_IDS } from './model-catalog';

/** What the price data (genai-prices) says of a model name: the model it matched, and its prices. */
export type PriceDataMatch = { id: string; prices: Record<string, unknown> };

/** Names remembered; they come from requests, so the memo is bounded. */
const memo = boundedCache<string, { match: PriceDataMatch | null }>(10_000);
const PROBE = { input_tokens: 0, output_tokens: 0 };

const bareName = (kind: string, model: string) => (model.startsWith(`${kind}/`) ? model.slice(kind.length + 1) : model);

/** The price data's match for a model of a kind (a `<vendor>/` prefix allowed), looked up once per name. */
export function priceDataMatch(kind: ProviderKind | string, model: string): PriceDataMatch | null {
  const bare = bareName(kind, model);
  const key = `${kind}|${bare}`;
  let found = memo.get(key);
  if (!found) {
    const providerId = PRICE_PROVIDER_IDS[kind as ProviderKind];
    const priced = providerId ? calcPrice(PROBE, bare, { providerId }) : null;
    memo.set(key, (found = { match: priced ? { id: priced.model.id, prices: priced.model_price as Record<string, unknown> } : null }));
  }
  return found.match;
}

/**
 * The model a name stands for in the price data: a provider's snapshot name
 * (`gpt-4o-2024-08-06`) and its alias (`gpt-4o`) are one model, so a commitment on `gpt-4o`
 * counts what the provider answered as its snapshot. Without a `<vendor>/` prefix; the name
 * itself when the price data does not know it.
 */
export function canonicalModel(kind: ProviderKind | string, model: string): string {
  return priceDataMatch(kind, model)?.id ?? bareName(kind, model);
}
