import { calcPrice, type Usage as GenaiUsage } from '@pydantic/genai-prices';
import type { CostEstimate } from './cost';
import mediaListPrices from './media-list-prices.json';

/**
 * Prices of image, speech and transcription requests (issue 14), by the same sources as chat
 * (spec 2.2): the customer's rate for this provider (`custom_provider`), for the model
 * (`custom`), then the vendor's list price (`list`): `@pydantic/genai-prices` where it prices
 * the model, else the dated table in media-list-prices.json. A custom rate is `model_prices.unit`,
 * read by the model's kind: dollars per image, per second of audio transcribed, per character
 * of text spoken. Pure: the callers load the rates and measure the request.
 */
export type MediaKind = 'image' | 'speech' | 'transcription';
export type MediaUnit = 'image' | 'second' | 'character';
export const MEDIA_UNITS: Record<MediaKind, MediaUnit> = { image: 'image', speech: 'character', transcription: 'second' };

/** A stored rate as `model_prices` holds it (token rates only matter with token usage). */
export type MediaPriceEntry = {
  model: string;
  provider: string | null;
  unit: number | null;
  inputPerMillion?: number | null;
  outputPerMillion?: number | null;
  cachedInputPerMillion?: number | null;
};

export type MediaPrice = {
  unitPrice: number;
  unit: MediaUnit;
  source: 'custom_provider' | 'custom' | 'list';
  /** Where the figure came from: the customer's rate, the genai-prices data, or the shipped table. */
  basis: 'custom' | 'genai-prices' | 'table';
} | null;

/** Token usage as image, transcription and (streamed) speech responses report it. */
export type MediaTokenUsage = {
  input_tokens: number;
  output_tokens: number;
  total_tokens?: number;
  /** Images: `{text_tokens, image_tokens}`. */
  input_tokens_details?: { text_tokens?: number; image_tokens?: number; audio_tokens?: number; cached_tokens?: number };
  /** Transcriptions: `{text_tokens, audio_tokens}`. */
  input_token_details?: { text_tokens?: number; image_tokens?: number; audio_tokens?: number };
};

/** Which model a request names: the upstream name, and the gateway's id (`openai/dall-e-3`) when it differs. */
type Naming = { kind: string; model: string; modelId?: string };

type Variant = { size?: string; quality?: string; usd_per_image: number; output_tokens?: number };
type TokenPrices = { input_per_million: number; cached_input_per_million?: number; input_image_per_million?: number; input_audio_per_million?: number; output_per_million: number };
type ListRow = {
  providers: string[]; model: string; aliases?: string[]; billed_by: string;
  default?: { size: string; quality: string }; variants?: Variant[];
  token_prices?: TokenPrices; usd_per_unit?: number; published: string; source: string;
};

const TABLE: Record<MediaKind, ListRow[]> = { image: mediaListPrices.images, speech: mediaListPrices.speech, transcription: mediaListPrices.transcription };
export const MEDIA_PRICES_AS_OF: string = mediaListPrices.as_of;

/** Our kinds under genai-prices' provider ids (as core/catalog/model-catalog.ts maps them). */
const GENAI_PROVIDER_IDS: Record<string, string> = { openai: 'openai', azure_openai: 'azure', google: 'google', mistral: 'mistral', groq: 'groq', together: 'together', fireworks: 'fireworks', openrouter: 'openrouter' };

/** Dollars rounded to the nano-dollar, as chat costs are. */
const dollars = (value: number) => Math.round(value * 1e9) / 1e9;
/** A per-unit rate kept to the pico-dollar: 0.36/3600 is 0.0001, not 0.00009999999999999999. */
const rate = (value: number) => Math.round(value * 1e12) / 1e12;

function namesOf({ kind, model, modelId }: Naming): Set<string> {
  const names = new Set([model]);
  if (modelId) {
    names.add(modelId);
    if (modelId.startsWith(`${kind}/`)) names.add(modelId.slice(kind.length + 1));
  }
  if (model.startsWith(`${kind}/`)) names.add(model.slice(kind.length + 1));
  return names;
}

/** The table's row for this model served by this provider kind. */
export function mediaListRow(media: MediaKind, naming: Naming): ListRow | null {
  const names = namesOf(naming);
  return TABLE[media].find((r) => r.providers.includes(naming.kind) && (names.has(r.model) || (r.aliases ?? []).some((a) => names.has(a)))) ?? null;
}

/** genai-prices' figure for this usage, or null when it does not price the model (or rejects the usage). */
function genaiPrice(naming: Naming, usage: GenaiUsage): number | null {
  const providerId = GENAI_PROVIDER_IDS[naming.kind];
  if (!providerId) return null;
  for (const name of namesOf(naming)) {
    try {
      const result = calcPrice(usage, name, { providerId });
      if (result) return result.total_price;
    } catch {
      // Usage keys the model's prices cannot take: not priced this way.
    }
  }
  return null;
}

/** genai-prices' rate per second of audio, where it prices the model by duration (whisper-1). */
function genaiPerSecond(naming: Naming): number | null {
  const hour = genaiPrice(naming, { audio_seconds: 3600, input_audio_seconds: 3600 });
  return hour !== null && hour > 0 ? rate(hour / 3600) : null;
}

/** genai-prices' output-token rate (dollars a token), where it prices the model by tokens. */
function genaiOutputRate(naming: Naming): number | null {
  const million = genaiPrice(naming, { input_tokens: 0, output_tokens: 1_000_000 });
  return million !== null && million > 0 ? million / 1e6 : null;
}

/**
 * The variant a request gets: the one of its size and quality; where either is `auto`, absent
 * or not one the table lists, the dearest it could be (a hold must not fall short).
 */
function variantOf(row: ListRow, size: string | undefined, quality: string | undefined): Variant | null {
  let variants = row.variants ?? [];
  const want = (field: 'size' | 'quality', value: string | undefined) => {
    const chosen = value ?? row.default?.[field];
    if (chosen && variants.some((v) => v[field] === chosen)) variants = variants.filter((v) => v[field] === chosen);
  };
  want('size', size);
  want('quality', quality);
  return variants.reduce<Variant | null>((dearest, v) => (dearest === null || v.usd_per_image > dearest.usd_per_image ? v : dearest), null);
}

function customEntry(naming: Naming, prices: readonly MediaPriceEntry[], test: (p: MediaPriceEntry) => boolean) {
  const names = namesOf(naming);
  const matching = prices.filter((p) => names.has(p.model) && test(p));
  const own = matching.find((p) => p.provider === naming.kind);
  if (own) return { entry: own, source: 'custom_provider' as const };
  const any = matching.find((p) => p.provider === null);
  return any ? { entry: any, source: 'custom' as const } : null;
}

/**
 * The price of one unit (an image, a second of audio, a character of text) of this model served
 * by this provider kind, or null when no source prices it (unpriced, which is not free). Images
 * take the requested `size` and `quality`; gpt-image-1's per-image price is its output tokens at
 * that size and quality times its output-token rate (genai-prices, else the table).
 */
export function mediaPrice(
  kind: string,
  model: string,
  options: { media: MediaKind; modelId?: string; size?: string; quality?: string },
  customPrices: readonly MediaPriceEntry[],
): MediaPrice {
  const naming: Naming = { kind, model, modelId: options.modelId };
  const unit = MEDIA_UNITS[options.media];
  const custom = customEntry(naming, customPrices, (p) => p.unit !== null && p.unit !== undefined);
  if (custom) return { unitPrice: custom.entry.unit!, unit, source: custom.source, basis: 'custom' };

  const row = mediaListRow(options.media, naming);
  if (options.media === 'image') {
    if (!row) return null;
    const variant = variantOf(row, options.size, options.quality);
    if (!variant) return null;
    if (row.billed_by === 'tokens' && variant.output_tokens !== undefined) {
      const fromGenai = genaiOutputRate(naming);
      const perToken = fromGenai ?? row.token_prices!.output_per_million / 1e6;
      return { unitPrice: dollars(variant.output_tokens * perToken), unit, source: 'list', basis: fromGenai !== null ? 'genai-prices' : 'table' };
    }
    return { unitPrice: variant.usd_per_image, unit, source: 'list', basis: 'table' };
  }
  if (options.media === 'transcription') {
    const perSecond = genaiPerSecond(naming);
    if (perSecond !== null) return { unitPrice: perSecond, unit, source: 'list', basis: 'genai-prices' };
  }
  return row?.usd_per_unit !== undefined ? { unitPrice: row.usd_per_unit, unit, source: 'list', basis: 'table' } : null;
}

/** A token-billed response priced by tokens: the customer's token rates, else genai-prices, else the table's. */
function tokenCost(media: MediaKind, naming: Naming, prices: readonly MediaPriceEntry[], usage: MediaTokenUsage): CostEstimate {
  const custom = customEntry(naming, prices, (p) => p.unit == null && (p.inputPerMillion != null || p.outputPerMillion != null));
  const details = { ...usage.input_token_details, ...usage.input_tokens_details };
  if (custom) {
    const { entry } = custom;
    const cached = details.cached_tokens ?? 0;
    const input = entry.inputPerMillion ?? 0;
    const cost = ((usage.input_tokens - cached) * input + cached * (entry.cachedInputPerMillion ?? input) + usage.output_tokens * (entry.outputPerMillion ?? 0)) / 1e6;
    return { cost: dollars(cost), source: custom.source };
  }
  const genai: GenaiUsage = { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens };
  if (details.image_tokens) genai.input_image_tokens = details.image_tokens;
  if (details.audio_tokens) genai.input_audio_tokens = details.audio_tokens;
  if (details.cached_tokens) genai.cache_read_tokens = details.cached_tokens;
  const fromGenai = genaiPrice(naming, genai);
  if (fromGenai !== null) return { cost: dollars(fromGenai), source: 'list' };
  const t = mediaListRow(media, naming)?.token_prices;
  if (!t) return null;
  const image = details.image_tokens ?? 0;
  const audio = details.audio_tokens ?? 0;
  const text = usage.input_tokens - image - audio;
  const cost = text * t.input_per_million + image * (t.input_image_per_million ?? t.input_per_million) + audio * (t.input_audio_per_million ?? t.input_per_million) + usage.output_tokens * t.output_per_million;
  return { cost: dollars(cost / 1e6), source: 'list' };
}

/** Whether a custom per-unit rate applies (it beats any list price, token usage or not). */
const hasCustomUnit = (naming: Naming, prices: readonly MediaPriceEntry[]) => customEntry(naming, prices, (p) => p.unit !== null && p.unit !== undefined) !== null;

type Common = { kind: string; model: string; modelId?: string; prices: readonly MediaPriceEntry[] };

/**
 * What `n` images cost: the response's token usage where the model is billed by tokens
 * (gpt-image-1) and no custom per-image rate applies, else `n` times the price of one image
 * at the size and quality served.
 */
export function imageCost(input: Common & { n: number; size?: string; quality?: string; usage?: MediaTokenUsage | null }): CostEstimate {
  const naming: Naming = input;
  if (input.usage && !hasCustomUnit(naming, input.prices)) {
    const byTokens = tokenCost('image', naming, input.prices, input.usage);
    if (byTokens) return byTokens;
  }
  const price = mediaPrice(input.kind, input.model, { media: 'image', modelId: input.modelId, size: input.size, quality: input.quality }, input.prices);
  return price ? { cost: dollars(price.unitPrice * Math.max(1, input.n)), source: price.source } : null;
}

/** What speaking `characters` of text costs (by tokens when a streamed response reported them). */
export function speechCost(input: Common & { characters: number; usage?: MediaTokenUsage | null }): CostEstimate {
  const naming: Naming = input;
  if (input.usage && !hasCustomUnit(naming, input.prices)) {
    const byTokens = tokenCost('speech', naming, input.prices, input.usage);
    if (byTokens) return byTokens;
  }
  const price = mediaPrice(input.kind, input.model, { media: 'speech', modelId: input.modelId }, input.prices);
  return price ? { cost: dollars(price.unitPrice * input.characters), source: price.source } : null;
}

/**
 * What transcribing `seconds` of audio costs: by tokens where the response reports them
 * (gpt-4o-transcribe), else by duration (whisper-1 reports `{type: 'duration', seconds}`).
 */
export function transcriptionCost(input: Common & { seconds: number; usage?: MediaTokenUsage | { type: 'duration'; seconds: number } | null }): CostEstimate {
  const naming: Naming = input;
  const usage = input.usage;
  if (usage && !('type' in usage && usage.type === 'duration') && !hasCustomUnit(naming, input.prices)) {
    const byTokens = tokenCost('transcription', naming, input.prices, usage as MediaTokenUsage);
    if (byTokens) return byTokens;
  }
  const seconds = usage && 'type' in usage && usage.type === 'duration' ? usage.seconds : input.seconds;
  const price = mediaPrice(input.kind, input.model, { media: 'transcription', modelId: input.modelId }, input.prices);
  return price ? { cost: dollars(price.unitPrice * seconds), source: price.source } : null;
}

/** Each input image of an edit is held at this many image-input tokens (a 2048-pixel image at high input fidelity stays below it). */
export const EDIT_INPUT_IMAGE_TOKENS = 6_000;
/** A streamed gpt-image-1 request pays this many output tokens for each partial image. */
export const PARTIAL_IMAGE_OUTPUT_TOKENS = 100;

/**
 * The most `n` images can cost, held before the call: `n` times one image at the requested size
 * and quality (the dearest where `auto`). A token-billed model at its list price adds its input:
 * the prompt at a token every character and each input image of an edit at
 * EDIT_INPUT_IMAGE_TOKENS, and each streamed partial image.
 */
export function imageWorstCase(input: Common & { n: number; size?: string; quality?: string; promptCharacters?: number; inputImages?: number; partialImages?: number }): CostEstimate {
  const naming: Naming = input;
  const price = mediaPrice(input.kind, input.model, { media: 'image', modelId: input.modelId, size: input.size, quality: input.quality }, input.prices);
  if (!price) return null;
  const n = Math.max(1, input.n);
  let cost = price.unitPrice * n;
  const row = mediaListRow('image', naming);
  if (price.source === 'list' && row?.billed_by === 'tokens' && row.token_prices) {
    const t = row.token_prices;
    const outputRate = genaiOutputRate(naming) ?? t.output_per_million / 1e6;
    cost += (input.promptCharacters ?? 0) * t.input_per_million / 1e6
      + (input.inputImages ?? 0) * EDIT_INPUT_IMAGE_TOKENS * (t.input_image_per_million ?? t.input_per_million) / 1e6
      + n * (input.partialImages ?? 0) * PARTIAL_IMAGE_OUTPUT_TOKENS * outputRate;
  }
  return { cost: dollars(cost), source: price.source };
}

/** What speech is held at before the call: its input characters at the per-character price. */
export function speechWorstCase(input: Common & { characters: number }): CostEstimate {
  return speechCost({ ...input, usage: null });
}

/**
 * What a transcription is held at before the call: the file's duration (audio-duration.ts; the
 * size fallback when its header is unreadable) at the per-second price. Token-billed models are
 * held at the vendor's published per-minute estimate.
 */
export function transcriptionWorstCase(input: Common & { seconds: number }): CostEstimate {
  return transcriptionCost({ ...input, usage: null });
}
