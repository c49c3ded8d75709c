import type { ModelCatalog } from '../catalog/model-catalog';
import { outputCeiling, requestedMaxTokens } from '../chat/prepare';
import { changesPrice, priceChangingFeatures, withPriceChangingFeatures } from '../pricing/priced-features';
import { GatewayError } from '../errors';
import { costAt } from '../pricing/cost';
import { resolvedPrice } from '../pricing/resolved-price';
import { NATIVE_REQUEST, type CacheWrites, type ChatBody } from '../providers/types';
import type { Candidate } from '../routing/candidates';
import type { OrgConfig } from '../routing/org-config';

/**
 * Prompt tokens are estimated from the request's size: about three bytes of JSON a token
 * (English prose runs near four), so the estimate leans high. Settling uses the real count.
 */
const BYTES_PER_TOKEN_ESTIMATE = 3;
/**
 * A part that is not text (an image, audio, a file) costs tokens its JSON size does not show:
 * a high-detail image runs to about 1,600, audio and documents more. Each is held at this.
 */
const NON_TEXT_PART_TOKENS = 8_000;

/** How many choices a request asks for: `n` choices each write up to the output cap. */
export function choiceCount(body: Pick<ChatBody, 'n'>): number {
  return typeof body.n === 'number' && body.n > 1 ? body.n : 1;
}

/** Tokens of generated text estimated from its UTF-8 size, leaning high like the prompt's. */
export function estimateOutputTokens(bytes: number): number {
  return Math.ceil(bytes / BYTES_PER_TOKEN_ESTIMATE);
}

/** Tokens of one text input (an embedding's), estimated as a prompt's are. */
export function estimateTextTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text) / BYTES_PER_TOKEN_ESTIMATE);
}

export function estimatePromptTokens(body: Pick<ChatBody, 'messages' | 'tools'>): number {
  const nonText = body.messages.reduce((n, m) => n + (Array.isArray(m.content) ? m.content.filter((p) => (p as { type?: string }).type !== 'text').length : 0), 0);
  return Math.ceil(Buffer.byteLength(JSON.stringify([body.messages, body.tools ?? null])) / BYTES_PER_TOKEN_ESTIMATE) + nonText * NON_TEXT_PART_TOKENS;
}

/**
 * Parts the native request sends that its chat translation leaves out: an image or document
 * inside an Anthropic `tool_result` (the translation keeps a tool result's text). Each is held
 * as any part that is not text.
 */
function nativeOnlyNonTextParts(body: ChatBody): number {
  const native = body[NATIVE_REQUEST];
  if (native?.wire !== 'anthropic-messages' || !Array.isArray(native.body.messages)) return 0;
  let parts = 0;
  for (const message of native.body.messages as Array<{ content?: unknown }>) {
    if (!Array.isArray(message?.content)) continue;
    for (const block of message.content as Array<{ type?: unknown; content?: unknown }>) {
      if (block?.type === 'tool_result' && Array.isArray(block.content)) parts += (block.content as Array<{ type?: unknown }>).filter((p) => p?.type !== 'text').length;
    }
  }
  return parts;
}

/**
 * Prompt-cache writes a request may be billed for, held at their rate: a Messages request that
 * marks a cache breakpoint (`cache_control`, on a block or the request) sent as it came to
 * Anthropic may write its whole prompt to the cache, at 1.25x the input rate for 5 minutes or 2x
 * for an hour (when any breakpoint asks for `"ttl": "1h"`). Undefined when it marks none.
 */
export function heldCacheWrites(body: ChatBody, promptTokens: number): CacheWrites | undefined {
  const native = body[NATIVE_REQUEST];
  if (native?.wire !== 'anthropic-messages') return undefined;
  const text = JSON.stringify(native.body);
  if (!text.includes('"cache_control"')) return undefined;
  return { total: promptTokens, ttl_1h: /"ttl"\s*:\s*"1h"/.test(text) ? promptTokens : 0 };
}

/**
 * The most a request can cost, over every candidate it may reach (failover and fallbacks):
 * the prompt estimate plus the output ceiling (the request's `max_tokens` or its alias, the
 * larger when both are given, as `prepareBody` sends it; else the model's maximum output),
 * priced. A candidate nobody prices is refused under a blocking budget
 * (`unpriced_model_under_budget`) unless the organization allows unpriced traffic; then it
 * counts as 0.
 */
export function worstCaseCost(candidates: readonly Candidate[], body: ChatBody, config: Pick<OrgConfig, 'prices' | 'unpricedBudgetPolicy'>, catalog: ModelCatalog): number {
  const promptTokens = estimatePromptTokens(body) + nativeOnlyNonTextParts(body) * NON_TEXT_PART_TOKENS;
  const choices = choiceCount(body);
  const requested = requestedMaxTokens(body);
  let worst = 0;
  const features = priceChangingFeatures(body as Record<string, unknown>);
  const writes = heldCacheWrites(body, promptTokens);
  for (const c of candidates) {
    const output = choices * (requested ?? outputCeiling(catalog, c.connection.kind, c.upstreamModel));
    // The entry the settled cost will read too (core/pricing/resolved-price.ts).
    const price = resolvedPrice({ kind: c.connection.kind, upstreamModel: c.upstreamModel, modelId: c.modelId, prices: config.prices, catalog });
    const text = costAt(price, promptTokens, 0, output, writes);
    // A priority tier, audio output or web search is priced from the price data, or unpriced.
    const estimate = changesPrice(features) ? withPriceChangingFeatures(text, features, c.connection.kind, c.upstreamModel) : text;
    if (!estimate) {
      if (config.unpricedBudgetPolicy !== 'allow') {
        const what = text && features.unpriced.length > 0 ? `\`${features.unpriced[0]}\` on \`${c.modelId}\`` : text ? `Web search on \`${c.modelId}\`` : `\`${c.modelId}\``;
        throw new GatewayError('unpriced_model_under_budget', `${what} has no price, and a spend limit applies to this request; enter a rate or allow unpriced traffic.`);
      }
      continue;
    }
    worst = Math.max(worst, estimate.cost);
  }
  return worst;
}
