import { createHash } from 'node:crypto';
import { countWords } from './turn';

/**
 * Embeddings as the providers serve them (served through media.ts, with its credential check and
 * directives):
 *   OpenAI (and every compatible kind, and Azure deployments)   POST .../embeddings
 *   Gemini API                                                   POST models/<model>:batchEmbedContents
 * Vectors are deterministic: seeded by the model and the text, unit length. `dimensions` on
 * OpenAI's v3 models keeps the first n values and makes them unit length again, as the real
 * shortened vectors are; Gemini's `outputDimensionality` keeps the first n without normalising
 * (the real API leaves that to the caller below the model's full size). OpenAI-wire usage counts
 * words as tokens (a token-id input counts its ids); Gemini states no usage, as the real API.
 */

type EmbedModel = { dimensions: number; shortenable: boolean };

/** The models each wire knows, with their full vector size. */
export const OPENAI_EMBEDDING_MODELS: Record<string, EmbedModel> = {
  'text-embedding-3-small': { dimensions: 1536, shortenable: true },
  'text-embedding-3-large': { dimensions: 3072, shortenable: true },
  'text-embedding-ada-002': { dimensions: 1536, shortenable: false },
  // Compatible kinds on the same prefix.
  'mistral-embed': { dimensions: 1024, shortenable: false },
  'BAAI/bge-large-en-v1.5': { dimensions: 1024, shortenable: false },
  'nomic-ai/nomic-embed-text-v1.5': { dimensions: 768, shortenable: true },
};
export const GEMINI_EMBEDDING_MODELS: Record<string, EmbedModel> = {
  'gemini-embedding-001': { dimensions: 3072, shortenable: true },
  'text-embedding-004': { dimensions: 768, shortenable: true },
};

/** The real per-request limits: OpenAI 2,048 inputs, Gemini 100 per batch. */
const OPENAI_MAX_INPUTS = 2048;
const GEMINI_MAX_BATCH = 100;
const OPENAI_FIELDS = new Set(['input', 'model', 'encoding_format', 'dimensions', 'user']);

/** A unit vector of `size` values, the same for the same model and text. */
export function sandboxVector(model: string, text: string, size: number): Float32Array {
  const out = new Float32Array(size);
  let block = Buffer.alloc(0);
  for (let i = 0, counter = 0; i < size; i++) {
    if (i % 8 === 0) block = createHash('sha256').update(`${model}\n${counter++}\n${text}`).digest();
    out[i] = block.readInt32LE((i % 8) * 4) / 2 ** 31;
  }
  return scaledToUnit(out);
}

function scaledToUnit(v: Float32Array): Float32Array {
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return norm === 0 ? v : v.map((x) => x / norm);
}

const base64Of = (v: Float32Array) => {
  const bytes = Buffer.alloc(v.length * 4);
  v.forEach((x, i) => bytes.writeFloatLE(x, i * 4));
  return bytes.toString('base64');
};

export type EmbeddingRefusal = { status?: number; message: string; param?: string | null; code?: string | null };
/** A refusal, or the answer and the input tokens the provider bills for it (Gemini bills tokens it does not state). */
export type EmbeddingPlan = { refusal: EmbeddingRefusal } | { answer: Record<string, unknown>; model: string; tokens: number };

/** The texts of a request, where directives are read from. */
export function embeddingTexts(body: Record<string, unknown>): string {
  if (Array.isArray(body.requests)) {
    return body.requests.map((r) => ((r as { content?: { parts?: Array<{ text?: unknown }> } })?.content?.parts ?? []).map((p) => String(p?.text ?? '')).join(' ')).join(' ');
  }
  const input = body.input;
  return typeof input === 'string' ? input : Array.isArray(input) ? input.filter((i) => typeof i === 'string').join(' ') : '';
}

const isTokenIds = (x: unknown): x is number[] => Array.isArray(x) && x.length > 0 && x.every((t) => Number.isInteger(t) && t >= 0);

/** `POST /v1/embeddings` on the OpenAI wire (Azure: the deployment names the model). */
export function planOpenAiEmbeddings(body: Record<string, unknown>, deployment?: string): EmbeddingPlan {
  const unknown = Object.keys(body).find((k) => !OPENAI_FIELDS.has(k));
  if (unknown) return { refusal: { message: `Unrecognized request argument supplied: ${unknown}`, param: null, code: null } };
  const model = deployment ?? (typeof body.model === 'string' ? body.model : '');
  if (!model) return { refusal: { message: "Missing required parameter: 'model'.", param: 'model', code: 'missing_required_parameter' } };
  const spec = OPENAI_EMBEDDING_MODELS[model];
  if (!spec) return { refusal: { status: 404, message: `The model \`${model}\` does not exist or you do not have access to it.`, param: null, code: 'model_not_found' } };
  const raw = body.input;
  const inputs: Array<string | number[]> | null = typeof raw === 'string' ? [raw] : isTokenIds(raw) ? [raw] : Array.isArray(raw) ? (raw as Array<string | number[]>) : null;
  const invalid = { refusal: { message: "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", param: null, code: null } };
  if (!inputs || inputs.length === 0 || inputs.length > OPENAI_MAX_INPUTS) return invalid;
  if (inputs.some((i) => (typeof i === 'string' ? i === '' : !isTokenIds(i)))) return invalid;
  const format = body.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') return { refusal: { message: `Invalid value: '${String(format)}'. Supported values are: 'float' and 'base64'.`, param: 'encoding_format', code: 'invalid_value' } };
  let size = spec.dimensions;
  if (body.dimensions !== undefined) {
    if (!spec.shortenable) return { refusal: { message: 'This model does not support specifying dimensions.', param: null, code: null } };
    const d = Number(body.dimensions);
    if (!Number.isInteger(d) || d < 1 || d > spec.dimensions) return { refusal: { message: `Invalid 'dimensions': integer out of range. Expected a value between 1 and ${spec.dimensions}, but got ${String(body.dimensions)} instead.`, param: 'dimensions', code: 'integer_out_of_range' } };
    size = d;
  }
  const texts = inputs.map((i) => (typeof i === 'string' ? i : i.join(' ')));
  const tokens = inputs.reduce((n, i) => n + (typeof i === 'string' ? Math.max(1, countWords(i)) : i.length), 0);
  return {
    answer: {
      object: 'list',
      data: texts.map((text, index) => {
        // Shortened vectors are the full one's first values, unit length again.
        const vector = scaledToUnit(sandboxVector(model, text, spec.dimensions).slice(0, size));
        return { object: 'embedding', index, embedding: format === 'base64' ? base64Of(vector) : Array.from(vector) };
      }),
      model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    },
    model,
    tokens,
  };
}

/** `POST models/<model>:batchEmbedContents` on the Gemini API. */
export function planGeminiEmbeddings(body: Record<string, unknown>, model: string): EmbeddingPlan {
  const spec = GEMINI_EMBEDDING_MODELS[model];
  if (!spec) return { refusal: { status: 404, message: `models/${model} is not found for API version v1beta, or is not supported for batchEmbedContents. Call ListModels to see the list of available models and their supported methods.` } };
  const unknown = Object.keys(body).find((k) => k !== 'requests');
  if (unknown) return { refusal: { message: `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.` } };
  const requests = body.requests;
  if (!Array.isArray(requests) || requests.length === 0) return { refusal: { message: '* BatchEmbedContentsRequest.requests: requests is not specified' } };
  if (requests.length > GEMINI_MAX_BATCH) return { refusal: { message: `* BatchEmbedContentsRequest.requests: at most ${GEMINI_MAX_BATCH} requests can be in one batch` } };
  const vectors: number[][] = [];
  let tokens = 0;
  for (const [i, r] of requests.entries()) {
    const req = (r ?? {}) as Record<string, unknown>;
    const extra = Object.keys(req).find((k) => !['model', 'content', 'taskType', 'title', 'outputDimensionality'].includes(k));
    if (extra) return { refusal: { message: `Invalid JSON payload received. Unknown name "${extra}" at 'requests[${i}]': Cannot find field.` } };
    if (req.model !== `models/${model}`) return { refusal: { message: `* BatchEmbedContentsRequest.requests[${i}].model: Model names must match. Expected models/${model}, got ${String(req.model)}.` } };
    const parts = (req.content as { parts?: Array<{ text?: unknown }> } | undefined)?.parts;
    if (!Array.isArray(parts) || parts.length === 0 || parts.some((p) => typeof p?.text !== 'string')) return { refusal: { message: `* BatchEmbedContentsRequest.requests[${i}].content: contents.parts must not be empty.` } };
    const text = parts.map((p) => p.text as string).join('');
    tokens += Math.max(1, countWords(text));
    if (text === '') return { refusal: { message: `* BatchEmbedContentsRequest.requests[${i}].content: text must not be empty.` } };
    let size = spec.dimensions;
    if (req.outputDimensionality !== undefined) {
      const d = Number(req.outputDimensionality);
      if (!Number.isInteger(d) || d < 1 || d > spec.dimensions) return { refusal: { message: `* BatchEmbedContentsRequest.requests[${i}].output_dimensionality: must be between 1 and ${spec.dimensions}.` } };
      size = d;
    }
    // Below the full size the first values are answered as they are, not unit length.
    vectors.push(Array.from(sandboxVector(model, text, spec.dimensions).slice(0, size)));
  }
  return { answer: { embeddings: vectors.map((values) => ({ values })) }, model, tokens };
}
