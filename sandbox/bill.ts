import { createHash } from 'node:crypto';
import { calcPrice } from '@pydantic/genai-prices';
// Price data, not gateway code: the same published figures the gateway prices from (issue 54
// allows the same source); the arithmetic here is the sandbox's own.
import mediaPrices from '../core/pricing/media-list-prices.json';
import videoPrices from '../core/pricing/video-list-prices.json';

/**
 * What each provider would bill for the calls the sandbox served: the oracle the money soak
 * reconciles the gateway's ledger against (DESIGN 5). A provider bills the work it accepted,
 * not what its client read, so a line is written when a call is accepted, for the whole answer,
 * whether the stream is then cut, abandoned or read to its end.
 *
 * Lines are kept per credential (as its SHA-256, never the secret) and carry the gateway's
 * request id when the call said one (`x-client-request-id`, as OpenAI's API takes it) and a
 * video submit's Idempotency-Key.
 */
export type BillUnits = {
  /** Every prompt token, cached and cache-written ones included (genai-prices' convention). */
  input_tokens?: number;
  cache_read_tokens?: number;
  /** Every prompt token written to the cache; `cache_write_1h_tokens` of them for an hour. */
  cache_write_tokens?: number;
  cache_write_1h_tokens?: number;
  input_audio_tokens?: number;
  /** Every output token, reasoning and thinking included. */
  output_tokens?: number;
  /** Of the output, how many were reasoning or thinking (informational: they are in `output_tokens`). */
  reasoning_tokens?: number;
  web_searches?: number;
  images?: number;
  characters?: number;
  audio_seconds?: number;
  video_seconds?: number;
};

export type BillLine = {
  /** When the line was written: the call accepted (after a `delay_ms`, when the client hung up, at the delay's end). */
  at: string;
  /** When the call reached the sandbox. */
  receivedAt: string;
  /** SHA-256 (hex) of the credential the call carried. */
  credential: string;
  requestId: string | null;
  idempotencyKey: string | null;
  provider: 'openai' | 'azure' | 'anthropic' | 'google';
  endpoint: string;
  model: string;
  /** OpenAI's `service_tier` when not the default (`priority` or `flex`), or `batch` for a request of a provider batch. */
  tier: string | null;
  units: BillUnits;
  /** What the provider bills, in USD; null when its list prices do not price the model. */
  usd: number | null;
  /** The call's `tag=<text>` directive, when it had one: a client's own name for it. */
  tag?: string;
};

/** A line as the server gives it: the call's credential and headers (its request id and Idempotency-Key are read from them). */
export type BillInput = Omit<BillLine, 'at' | 'receivedAt' | 'credential' | 'usd' | 'requestId' | 'idempotencyKey'> & {
  credential: string | undefined; headers: Record<string, string | string[] | undefined>; usd?: number | null; receivedAt?: Date;
};

export const credentialHash = (secret: string) => createHash('sha256').update(secret).digest('hex');

/**
 * OpenAI's published multiples of the standard rates for its service tiers: Priority costs
 * 1.7x to 2x standard by model (2x is the highest listed, kept as the bill's figure, so the
 * oracle never under-states it); Flex is half of standard where it is offered. A request of a
 * batch (OpenAI's Batch API, Anthropic's Message Batches) is half of standard at both.
 */
const TIER_MULTIPLIER: Record<string, number> = { priority: 2, flex: 0.5, batch: 0.5 };

const GENAI_PROVIDER: Record<BillLine['provider'], string> = { openai: 'openai', azure: 'openai', anthropic: 'anthropic', google: 'google' };

/** Tokens (and web searches) at the model's list price, times the tier's multiple. */
export function tokenUsd(provider: BillLine['provider'], model: string, units: BillUnits, tier: string | null = null): number | null {
  const usage = {
    input_tokens: units.input_tokens ?? 0,
    cache_read_tokens: units.cache_read_tokens || undefined,
    cache_write_tokens: units.cache_write_tokens || undefined,
    cache_write_1h_tokens: units.cache_write_1h_tokens || undefined,
    input_audio_tokens: units.input_audio_tokens || undefined,
    output_tokens: units.output_tokens ?? 0,
  };
  const priced = calcPrice(usage, model, { providerId: GENAI_PROVIDER[provider] });
  if (!priced) return null;
  const perThousand = priced.model_price.web_searches_kcount;
  const searches = units.web_searches ? (units.web_searches / 1000) * (typeof perThousand === 'number' ? perThousand : 10) : 0;
  return priced.total_price * (tier ? TIER_MULTIPLIER[tier] ?? 1 : 1) + searches;
}

type ImageRow = { model: string; aliases?: string[]; billed_by: string; token_prices?: Record<string, number>; variants: Array<{ size?: string; quality?: string; usd_per_image?: number }> };
type UnitRow = { model: string; billed_by: string; usd_per_unit: number; token_prices?: Record<string, number> };

const imageRow = (model: string) => (mediaPrices.images as ImageRow[]).find((r) => r.model === model || r.aliases?.includes(model));

/** Images billed per image: by size and quality (DALL-E), or one price (Imagen). */
export function imageUsd(model: string, count: number, size?: string, quality?: string): number | null {
  const row = imageRow(model);
  if (!row || row.billed_by !== 'image') return null;
  const variant = row.variants.find((v) => (v.size === undefined || v.size === size) && (v.quality === undefined || v.quality === quality)) ?? (row.variants.length === 1 ? row.variants[0] : undefined);
  return variant?.usd_per_image === undefined ? null : variant.usd_per_image * count;
}

/** A token-billed media model (gpt-image-1, gpt-4o transcribe and TTS) at its table's per-million rates. */
export function mediaTokenUsd(model: string, tokens: { text?: number; image?: number; audio?: number; output?: number }): number | null {
  const row = [...(mediaPrices.images as ImageRow[]), ...(mediaPrices.speech as UnitRow[]), ...(mediaPrices.transcription as UnitRow[])].find((r) => r.model === model);
  const p = row?.token_prices;
  if (!p) return null;
  const per = (n: number | undefined, rate: number | undefined) => ((n ?? 0) * (rate ?? 0)) / 1e6;
  return per(tokens.text, p.input_per_million) + per(tokens.image, p.input_image_per_million) + per(tokens.audio, p.input_audio_per_million) + per(tokens.output, p.output_per_million);
}

/** Speech per character or transcription per second, from the table's `usd_per_unit`. */
export function unitUsd(kind: 'speech' | 'transcription', model: string, units: number): number | null {
  const row = (mediaPrices[kind] as UnitRow[]).find((r) => r.model === model);
  return row ? row.usd_per_unit * units : null;
}

/** Seconds of video by the model's variant (OpenAI `size`, Veo `resolution`). */
export function videoUsd(model: string, seconds: number, variant: { size?: string; resolution?: string }): number | null {
  type Row = { model: string; usd_per_second: number; variants?: Array<{ size?: string; resolution?: string; usd_per_second: number }> };
  const row = (videoPrices.prices as Row[]).find((r) => r.model === model);
  if (!row) return null;
  const v = row.variants?.find((x) => (x.size !== undefined && x.size === variant.size) || (x.resolution !== undefined && x.resolution === variant.resolution));
  return (v?.usd_per_second ?? row.usd_per_second) * seconds;
}

export type Bill = {
  add(input: BillInput): BillLine;
  /** A credential's lines, optionally those of one request id. */
  lines(secret: string, requestId?: string): BillLine[];
  all(): readonly BillLine[];
};

export function createBill(): Bill {
  const lines: BillLine[] = [];
  return {
    add(input) {
      const usd = input.usd !== undefined ? input.usd : tokenUsd(input.provider, input.model, input.units, input.tier);
      const { receivedAt, headers, ...rest } = input;
      const at = new Date().toISOString();
      const line: BillLine = {
        ...rest, at, receivedAt: receivedAt?.toISOString() ?? at, credential: credentialHash(input.credential ?? ''), usd,
        requestId: headerOf(headers, 'x-client-request-id'), idempotencyKey: headerOf(headers, 'idempotency-key'),
      };
      lines.push(line);
      return line;
    },
    lines(secret, requestId) {
      const hash = credentialHash(secret);
      return lines.filter((l) => l.credential === hash && (requestId === undefined || l.requestId === requestId));
    },
    all: () => lines,
  };
}

/** A header's value, when the call carried it once. */
function headerOf(headers: Record<string, string | string[] | undefined>, name: string): string | null {
  const v = headers[name];
  return typeof v === 'string' && v ? v : null;
}
