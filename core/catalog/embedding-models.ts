import { isTokenEncodingName, type TokenEncodingName } from '../guardrails/token-ids';
import type { ProviderKind } from '../providers/kinds';
import table from './embedding-models.json';

/**
 * The models that embed (issue 35): which kinds serve them, how long their vectors are, and
 * whether `dimensions` may shorten them. The model catalog (models.dev) lists no embedding
 * model and the price data (genai-prices) prices them without saying they embed, so this small
 * dated table says only that; prices still come from the catalogue (docs/decisions.md).
 */
export type EmbeddingModel = {
  model: string;
  /** The vector length the model answers when `dimensions` is not given. */
  dimensions: number;
  /** Whether the model takes `dimensions` (shortened, re-normalised vectors); others refuse it. */
  shortenable: boolean;
  /** The most tokens one input may hold. */
  maxInputTokens: number;
  /** The encoding of its token-id input, where the gateway can decode it for guardrails; else null. */
  tokenizer: TokenEncodingName | null;
};

type Row = { providers: string[]; model: string; dimensions: number; shortenable: boolean; max_input_tokens: number; tokenizer?: string };

/** A row's `tokenizer`, one the gateway can decode (a name it does not know is a mistake in the table). */
function tokenizerOf(r: Row): TokenEncodingName | null {
  if (r.tokenizer === undefined) return null;
  if (!isTokenEncodingName(r.tokenizer)) throw new Error(`embedding-models.json: ${r.model} names an unknown tokenizer ${r.tokenizer}`);
  return r.tokenizer;
}

const ROWS = (table.models as Row[]).map((r) => ({
  providers: r.providers,
  entry: { model: r.model, dimensions: r.dimensions, shortenable: r.shortenable, maxInputTokens: r.max_input_tokens, tokenizer: tokenizerOf(r) } satisfies EmbeddingModel,
}));

export const EMBEDDING_MODELS_AS_OF: string = table.as_of;

/** The table's row for this model on this kind (`text-embedding-3-small`, or `openai/text-embedding-3-small`), else null. */
export function embeddingModel(kind: ProviderKind, name: string): EmbeddingModel | null {
  const bare = name.startsWith(`${kind}/`) ? name.slice(kind.length + 1) : name;
  return ROWS.find((r) => r.providers.includes(kind) && r.entry.model === bare)?.entry ?? null;
}

/** The embedding models a kind serves, by name, for `/v1/models`. */
export function embeddingModelsOf(kind: ProviderKind): readonly string[] {
  return ROWS.filter((r) => r.providers.includes(kind)).map((r) => r.entry.model);
}
