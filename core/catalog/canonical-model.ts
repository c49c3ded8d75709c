import { calcPrice } from '@pydantic/genai-prices';
import { boundedCache } from '../bounded-cache';
import type { ProviderKind } from '../providers/kinds';
import { PRICE_PROVIDER_IDS } from './model-catalog';

/** Names remembered; they come from requests, so the memo is bounded. */
const MEMO_SIZE = 10_000;
const memo = boundedCache<string, string>(MEMO_SIZE);
const PROBE = { input_tokens: 0, output_tokens: 0 };

/**
 * The model a name stands for in the price data (genai-prices' match): a provider's snapshot
 * name (`gpt-4o-2024-08-06`) and its alias (`gpt-4o`) are one model, so a commitment on
 * `gpt-4o` counts what the provider answered as its snapshot. Without a `<vendor>/` prefix;
 * the name itself when the price data does not know it.
 */
export function canonicalModel(kind: ProviderKind | string, model: string): string {
  const bare = model.startsWith(`${kind}/`) ? model.slice(kind.length + 1) : model;
  const key = `${kind}|${bare}`;
  let found = memo.get(key);
  if (found === undefined) {
    const providerId = PRICE_PROVIDER_IDS[kind as ProviderKind];
    const priced = providerId ? calcPrice(PROBE, bare, { providerId }) : null;
    memo.set(key, (found = priced?.model?.id ?? bare));
  }
  return found;
}
