import { priceDataMatch } from '../catalog/price-data';
import type { ProviderKind } from '../providers/kinds';
import { NATIVE_REQUEST, type ChatBody } from '../providers/types';

/**
 * Request fields that change what the provider bills beyond the text token rates. Priced as
 * text they would be held and settled too low: a priority tier costs more per token, audio
 * output has its own (higher) rate, and each web search is billed per call. Where the price data
 * knows the price it is added; where it does not, the request is unpriced (cost unknown, and
 * refused under a blocking limit like any unpriced model), never priced as plain text.
 */
export type PriceChangingFeatures = {
  /** What no price is known for, as a client would name it (`service_tier: "priority"`, `audio output`). */
  unpriced: string[];
  /** `web_search_options`: a search per request, at the model's per-search price. */
  webSearch: boolean;
};

const STANDARD_TIERS: ReadonlySet<unknown> = new Set([undefined, null, 'auto', 'default']);

export function priceChangingFeatures(body: Record<string, unknown>): PriceChangingFeatures {
  const unpriced: string[] = [];
  // The price data has one rate per model: another tier (priority, flex, scale) is not it. A
  // Responses request's tier is not in its chat translation: it goes, as it came, to OpenAI's own
  // `/responses` (NATIVE_REQUEST), where it is billed; read there too (issue 54).
  const native = (body as ChatBody)[NATIVE_REQUEST];
  const tier = body.service_tier ?? (native?.wire === 'openai-responses' ? native.body.service_tier : undefined);
  if (!STANDARD_TIERS.has(tier)) unpriced.push(`service_tier: ${JSON.stringify(tier)}`);
  const modalities = body.modalities;
  if ((Array.isArray(modalities) && modalities.includes('audio')) || (body.audio !== undefined && body.audio !== null)) unpriced.push('audio output');
  return { unpriced, webSearch: body.web_search_options !== undefined && body.web_search_options !== null };
}

/** Whether a request has anything that changes its price. */
export function changesPrice(features: PriceChangingFeatures): boolean {
  return features.unpriced.length > 0 || features.webSearch;
}

/**
 * US dollars for one web search with this model, from the price data (`web_searches_kcount`,
 * per thousand); null when it has none. OpenAI's chat search models search once per request,
 * and the chat API does not report a count, so a request is held and settled at one search.
 */
export function webSearchPrice(kind: ProviderKind, model: string): number | null {
  const perThousand = priceDataMatch(kind, model)?.prices.web_searches_kcount;
  return typeof perThousand === 'number' ? perThousand / 1000 : null;
}

/**
 * What a request's price-changing fields do to a text estimate of one model: the estimate with
 * searches added, or null when a field has no known price (or the estimate itself is null).
 */
export function withPriceChangingFeatures<E extends { cost: number } | null>(estimate: E, features: PriceChangingFeatures, kind: ProviderKind, model: string): E | null {
  if (!estimate || features.unpriced.length > 0) return null;
  if (!features.webSearch) return estimate;
  const search = webSearchPrice(kind, model);
  if (search === null) return null;
  return Object.assign({}, estimate, { cost: Math.round((estimate.cost + search) * 1e9) / 1e9 });
}
