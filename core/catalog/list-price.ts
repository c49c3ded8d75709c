import { calcPrice, type ModelPrice, type PriceCalculation, type Provider, type TieredPrices } from '@pydantic/genai-prices';
import type { CacheWrites } from '../providers/types';

/**
 * A vendor list price resolved once for one (provider, model): the library's model found and its
 * dated price chosen, so a cost is arithmetic, not a search of the price data (issue 21).
 */
export type ListPrice = {
  /** How `cost` prices a usage: by the closed form below, or by the library on the resolved model. */
  readonly method: 'closed_form' | 'library';
  /** Epoch ms at which a dated price starts and this resolution stops holding; Infinity when none is due. */
  readonly validUntil: number;
  /** Whether a dated price has started since this was resolved (resolve again then). */
  expired(): boolean;
  /**
   * US dollars for this usage, exactly as `calcPrice` gives it. Input includes cached reads and
   * cache writes (`writes`: all of them, and the part kept for an hour), each at its own rate.
   */
  cost(inputTokens: number, cachedInputTokens: number, outputTokens: number, writes?: CacheWrites): number;
};

/** The library's price lookup (injectable so tests can count the searches). */
export type CalcPrice = typeof calcPrice;

/** Token price keys we price in closed form, by which of our usage counts they are charged on. */
const CHARGED_KEYS = { input_mtok: 'input', cache_read_mtok: 'cached', output_mtok: 'output' } as const;
/**
 * Price keys whose usage a chat usage never reports (cache writes, searches, audio, image and
 * video tokens): the library charges them on 0 and, being more specific than input or output,
 * they take nothing from those either. The per-request charge (`requests_kcount`) is not here:
 * the library counts every call as one request.
 */
const UNREPORTED_KEYS = new Set([
  'cache_write_mtok', 'cache_write_5m_mtok', 'cache_write_1h_mtok',
  'web_searches_kcount', 'storage_searches_kcount',
  'input_audio_mtok', 'cache_audio_read_mtok', 'output_audio_mtok',
  'input_image_mtok', 'cache_image_read_mtok', 'output_image_mtok',
  'input_video_mtok', 'output_video_mtok',
]);

type Tiers = { base: number; tiers: ReadonlyArray<{ start: number; price: number }> };
type Leg = { counts: 'input' | 'cached' | 'output'; rate: number | Tiers };

/** Dollars on `tokens` at a per-million rate, with the library's operations in its order. */
function legCost(rate: number | Tiers, tokens: number, inputTokens: number): number {
  if (typeof rate === 'number') return (rate * tokens) / 1e6;
  if (tokens <= 0) return 0;
  // The tier is the highest whose start the whole prompt (cached reads included) passes.
  let perMillion = rate.base;
  for (const tier of rate.tiers) if (inputTokens > tier.start) perMillion = tier.price;
  return (((perMillion * tokens) / 1e6) * 1e6) / 1e6;
}

/** The legs of a price the closed form can take, in the price's key order; null when it cannot. */
function closedFormLegs(price: ModelPrice): Leg[] | null {
  const legs: Leg[] = [];
  for (const [key, value] of Object.entries(price)) {
    if (value === undefined || UNREPORTED_KEYS.has(key)) continue;
    const counts = CHARGED_KEYS[key as keyof typeof CHARGED_KEYS];
    if (!counts) return null;
    if (typeof value === 'number') {
      legs.push({ counts, rate: value });
    } else {
      const tiered = value as TieredPrices;
      legs.push({ counts, rate: { base: tiered.base, tiers: [...tiered.tiers].sort((a, b) => a.start - b.start) } });
    }
  }
  return legs;
}

const isCount = (n: number) => Number.isFinite(n) && n >= 0;

/**
 * When the price changes by date: the earliest dated price still to start after `at`, and
 * whether any price depends on the time of day (then no resolution holds: the library decides
 * per call, on the resolved model).
 */
function schedule(model: PriceCalculation['model'], at: number): { validUntil: number; timeOfDay: boolean } {
  let validUntil = Infinity;
  let timeOfDay = false;
  for (const conditional of Array.isArray(model.prices) ? model.prices : []) {
    const constraint = conditional.constraint as { start_date?: string; start_time?: string } | undefined;
    if (constraint?.start_date !== undefined) {
      const starts = Date.parse(constraint.start_date);
      if (starts > at) validUntil = Math.min(validUntil, starts);
    } else if (constraint?.start_time !== undefined) {
      timeOfDay = true;
    }
  }
  return { validUntil, timeOfDay };
}

/**
 * The list price of a model the library found (`found`, from one `calcPrice` search at `at`).
 * Flat or tiered per-million token prices are computed in closed form, with the library's
 * arithmetic in its order, so the figure is the same to the bit. Any other shape (audio, image,
 * search or request prices, time-of-day prices) and any usage the library would reject go to
 * `calcPrice` with a provider holding the resolved model alone: no search of the price data.
 */
export function resolveListPrice(found: PriceCalculation, model: string, at: number, clock: () => number, calc: CalcPrice): ListPrice {
  const { validUntil, timeOfDay } = schedule(found.model, at);
  // The resolved model alone, matched by the name we ask for; the provider id is kept because
  // the library treats some providers' models specially (groq's whisper minimum).
  const alone: Provider = {
    id: found.provider.id,
    name: found.provider.name,
    api_pattern: found.provider.api_pattern,
    models: [{ ...found.model, match: { equals: model.toLowerCase().trim() }, prices: timeOfDay ? found.model.prices : found.model_price }],
  };
  const byLibrary = (inputTokens: number, cachedInputTokens: number, outputTokens: number, writes?: CacheWrites) =>
    calc({
      input_tokens: inputTokens, cache_read_tokens: cachedInputTokens || undefined, output_tokens: outputTokens,
      ...(writes && writes.total > 0 && { cache_write_tokens: writes.total, cache_write_1h_tokens: writes.ttl_1h || undefined }),
    }, model, { provider: alone, timestamp: new Date(clock()) })?.total_price ?? 0;
  const expired = validUntil === Infinity ? () => false : () => clock() >= validUntil;

  const legs = timeOfDay ? null : closedFormLegs(found.model_price);
  if (!legs) return { method: 'library', validUntil, expired, cost: byLibrary };
  // The library charges input net of cached reads only when cached reads have their own price.
  const cachedPriced = legs.some((l) => l.counts === 'cached');
  return {
    method: 'closed_form',
    validUntil,
    expired,
    cost(inputTokens, cachedInputTokens, outputTokens, writes) {
      // Cache writes have their own rates (5-minute and 1-hour, often tiered): the library prices them.
      if (writes && writes.total > 0) return byLibrary(inputTokens, cachedInputTokens, outputTokens, writes);
      const cached = cachedInputTokens || 0;
      // Counts the library would refuse (or clamp): let it answer, as it did before.
      if (!isCount(inputTokens) || !isCount(cached) || !isCount(outputTokens) || (cachedPriced && cached > inputTokens)) {
        return byLibrary(inputTokens, cachedInputTokens, outputTokens);
      }
      const uncached = cachedPriced ? inputTokens - cached : inputTokens;
      let input = 0;
      let output = 0;
      for (const leg of legs) {
        if (leg.counts === 'output') output += legCost(leg.rate, outputTokens, inputTokens);
        else input += legCost(leg.rate, leg.counts === 'cached' ? cached : uncached, inputTokens);
      }
      return input + output;
    },
  };
}
