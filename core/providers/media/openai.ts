import type { MediaTokenUsage } from '../../pricing/media-cost';
import type { UpstreamRequest } from '../types';
import { formatOverride, measuringFormat } from './transcript-formats';
import { float32FromBase64 } from './vectors';
import { MEDIA_ENDPOINTS, TRANSCRIPTION_FORMATS, type EmbeddingsResult, type ImageOut, type ImagesResult, type MediaAdapter, type MediaEndpoint, type TranscriptionFormat, type TranscriptionResult } from './types';

/** Where each endpoint lives under an OpenAI-wire base URL (or under an Azure deployment). */
export const OPENAI_MEDIA_PATHS: Record<MediaEndpoint, string> = {
  'images.generations': '/images/generations',
  'images.edits': '/images/edits',
  'audio.transcriptions': '/audio/transcriptions',
  'audio.speech': '/audio/speech',
  embeddings: '/embeddings',
};

/** The Azure `api-version` when the connection sets none (the one the chat adapter uses). */
export const AZURE_DEFAULT_API_VERSION = '2024-10-21';

/**
 * gpt-image models always answer base64 and refuse `response_format` outright (400
 * unknown_parameter), where dall-e and the compatible servers answer a link unless asked.
 */
export function isGptImageModel(model: string): boolean {
  return model.startsWith('gpt-image');
}

/** Whether the upstream name, or the name the client used for it, is a gpt-image model. */
function gptImage(model: string, modelId: string | undefined): boolean {
  return isGptImageModel(model) || (modelId !== undefined && isGptImageModel(modelId.slice(modelId.indexOf('/') + 1)));
}

/** The image type as the answer's `output_format` names it (gpt-image models state it). */
const OUTPUT_FORMAT_TYPES: Record<string, string> = { png: 'image/png', jpeg: 'image/jpeg', jpg: 'image/jpeg', webp: 'image/webp' };

/**
 * The image type read from the first bytes of the base64 text, for answers that do not state it:
 * xAI and Together answer JPEG without saying so, and labelling those PNG would mislead whoever
 * stores or serves them.
 */
function sniffImageType(b64: string): string | null {
  if (b64.startsWith('iVBORw0KGgo')) return 'image/png';
  if (b64.startsWith('/9j/')) return 'image/jpeg';
  // "RIFF" then four size bytes then "WEBP": the size varies, so check both halves.
  if (b64.startsWith('UklGR') && Buffer.from(b64.slice(0, 16), 'base64').toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  return null;
}

const isCount = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x) && x >= 0;

/** Only the counts MediaTokenUsage knows, from a details object; undefined when none is a count. */
function details(raw: unknown): MediaTokenUsage['input_tokens_details'] {
  if (!raw || typeof raw !== 'object') return undefined;
  const source = raw as Record<string, unknown>;
  const out: Record<string, number> = {};
  for (const key of ['text_tokens', 'image_tokens', 'audio_tokens', 'cached_tokens'] as const) if (isCount(source[key])) out[key] = source[key];
  return Object.keys(out).length ? out : undefined;
}

/**
 * Token usage as the images and transcription answers report it, in MediaTokenUsage's shape
 * (the `type: 'tokens'` tag of a transcription dropped); null when the counts are missing, so
 * the cost falls back to per-image or per-second pricing instead of charging zero tokens.
 */
export function mapMediaTokenUsage(raw: unknown): MediaTokenUsage | null {
  if (!raw || typeof raw !== 'object') return null;
  const u = raw as Record<string, unknown>;
  if (!isCount(u.input_tokens) || !isCount(u.output_tokens)) return null;
  const inputs = details(u.input_tokens_details);
  const input = details(u.input_token_details);
  return {
    input_tokens: u.input_tokens,
    output_tokens: u.output_tokens,
    total_tokens: isCount(u.total_tokens) ? u.total_tokens : u.input_tokens + u.output_tokens,
    ...(inputs && { input_tokens_details: inputs }),
    ...(input && { input_token_details: input }),
  };
}

/** The settings gpt-image answers report, passed on to the client as they came. */
const IMAGE_SETTINGS = ['background', 'output_format', 'quality', 'size'] as const;

/** An OpenAI images answer (generation or edit) in our terms; throws when an image came without base64. */
export function parseOpenAiImages(json: unknown): ImagesResult {
  if (!json || typeof json !== 'object') throw new Error('The images answer is not a JSON object.');
  const r = json as Record<string, unknown>;
  if (!Array.isArray(r.data) || r.data.length === 0) throw new Error('The images answer holds no images.');
  const stated = typeof r.output_format === 'string' ? OUTPUT_FORMAT_TYPES[r.output_format.toLowerCase()] : undefined;
  const images = r.data.map((item: unknown, i): ImageOut => {
    const d = (item ?? {}) as Record<string, unknown>;
    // Base64 was asked for; a link instead would mean fetching from the provider later, which the gateway never does.
    if (typeof d.b64_json !== 'string' || d.b64_json === '') throw new Error(`Image ${i} of the images answer has no base64 data.`);
    // xAI states a type on each image; gpt-image models state `output_format`; else the bytes tell.
    const own = typeof d.mime_type === 'string' && d.mime_type.startsWith('image/') ? d.mime_type : undefined;
    return {
      b64_json: d.b64_json,
      mime_type: own ?? stated ?? sniffImageType(d.b64_json) ?? 'image/png',
      ...(typeof d.revised_prompt === 'string' && { revised_prompt: d.revised_prompt }),
    };
  });
  const settings: Record<string, unknown> = {};
  for (const key of IMAGE_SETTINGS) if (r[key] !== undefined) settings[key] = r[key];
  return {
    created: typeof r.created === 'number' ? r.created : Math.floor(Date.now() / 1000),
    images,
    usage: mapMediaTokenUsage(r.usage),
    settings,
  };
}

/** A transcription answer in the format asked: JSON formats parsed, text formats as sent. */
export function parseOpenAiTranscription(format: string, text: string): TranscriptionResult {
  if (format !== 'json' && format !== 'verbose_json') return { body: text, usage: null };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`The ${format} transcription answer is not JSON.`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`The ${format} transcription answer is not a JSON object.`);
  const body = parsed as Record<string, unknown>;
  const raw = body.usage as { type?: unknown; seconds?: unknown } | undefined;
  let usage: TranscriptionResult['usage'] = null;
  if (raw?.type === 'duration' && isCount(raw.seconds)) usage = { type: 'duration', seconds: raw.seconds };
  else if (raw?.type === 'tokens' || (raw && raw.type === undefined)) usage = mapMediaTokenUsage(raw);
  // whisper's verbose_json before usage was reported (and compatible servers like Groq) state only `duration`.
  if (usage === null && format === 'verbose_json' && isCount(body.duration)) usage = { type: 'duration', seconds: body.duration };
  return { body, usage };
}

/** One vector as the answer gave it: a list of numbers, or base64 float32. */
function vectorOf(raw: unknown, i: number): Float32Array {
  if (typeof raw === 'string') return float32FromBase64(raw);
  if (Array.isArray(raw) && raw.every((x) => typeof x === 'number')) return Float32Array.from(raw as number[]);
  throw new Error(`Embedding ${i} of the answer is neither numbers nor base64.`);
}

/** An OpenAI embeddings answer: `data[].embedding` placed by `index`, `usage.prompt_tokens`. */
export function parseOpenAiEmbeddings(json: unknown, inputs: number): EmbeddingsResult {
  const r = (json ?? {}) as { data?: unknown; usage?: { prompt_tokens?: unknown } };
  if (!Array.isArray(r.data)) throw new Error('The embeddings answer holds no data.');
  const vectors: Float32Array[] = new Array(inputs);
  r.data.forEach((item: unknown, position) => {
    const d = (item ?? {}) as { index?: unknown; embedding?: unknown };
    const index = typeof d.index === 'number' ? d.index : position;
    if (!Number.isInteger(index) || index < 0 || index >= inputs || vectors[index]) throw new Error(`The embeddings answer has a stray index ${String(d.index)}.`);
    vectors[index] = vectorOf(d.embedding, index);
  });
  if (r.data.length !== inputs) throw new Error(`The embeddings answer holds ${r.data.length} vectors for ${inputs} inputs.`);
  return { vectors, promptTokens: isCount(r.usage?.prompt_tokens) ? r.usage.prompt_tokens : null };
}

export type OpenAiMediaOptions = {
  /** The endpoints the kind offers (all four by default). */
  endpoints?: readonly MediaEndpoint[];
  /** The upstream path of an endpoint for a model (Azure: under its deployment). */
  path?: (model: string, endpointPath: string) => string;
  /** Query parameters every call carries (Azure's `api-version`). */
  query?: (config: Record<string, unknown>) => Record<string, string>;
  /**
   * Whether embeddings are asked as base64 (a quarter of the bytes of decimal text). OpenAI and
   * Azure take it; a compatible server is asked in its default (floats), which every one serves.
   */
  embeddingsAsBase64?: boolean;
};

/**
 * The OpenAI image and audio wire: `openai`, Azure deployments, and the compatible kinds that
 * serve some of its endpoints. Bodies pass through (unknown fields too) with the model replaced;
 * images are always asked for as base64, so the gateway holds the bytes and never a link that
 * expires. A builder for an endpoint the kind does not offer throws: the caller checks
 * `endpoints` first (mediaAdapterFor), so reaching one is a bug, not a client error.
 */
export function openAiMediaAdapter(options: OpenAiMediaOptions = {}): MediaAdapter {
  const endpoints = options.endpoints ?? MEDIA_ENDPOINTS;
  const target = (endpoint: MediaEndpoint, model: string, config: Record<string, unknown>): Omit<UpstreamRequest, 'body'> => {
    if (!endpoints.includes(endpoint)) throw new Error(`This provider offers no ${endpoint}.`);
    const endpointPath = OPENAI_MEDIA_PATHS[endpoint];
    const query = options.query?.(config);
    return { method: 'POST', path: options.path ? options.path(model, endpointPath) : endpointPath, ...(query && { query }) };
  };

  return {
    endpoints,

    imagesRequest(body, { model, config, modelId }) {
      const { response_format: _asked, ...rest } = body;
      return {
        ...target('images.generations', model, config),
        body: gptImage(model, modelId) ? { ...rest, model } : { ...rest, model, response_format: 'b64_json' },
      };
    },

    parseImages: parseOpenAiImages,

    editRequest(_fields, { model, config, modelId }) {
      const { method: _post, ...call } = target('images.edits', model, config);
      return { ...call, overrides: { model, response_format: gptImage(model, modelId) ? null : 'b64_json' } };
    },

    transcriptionRequest(fields, { model, config, modelId }) {
      const { method: _post, ...call } = target('audio.transcriptions', model, config);
      // Asked in a format that states the audio's length (transcript-formats.ts), whatever the client asked.
      const asked = (TRANSCRIPTION_FORMATS as readonly unknown[]).includes(fields.response_format) ? fields.response_format as TranscriptionFormat : 'json';
      return { ...call, overrides: { model, ...formatOverride(asked, measuringFormat(asked, fields, model, modelId)) } };
    },

    parseTranscription: parseOpenAiTranscription,

    speechRequest(body, { model, config }) {
      // `delivery` is the gateway's own field (how the client wants the audio), never the provider's.
      const { delivery: _ours, ...rest } = body;
      return { ...target('audio.speech', model, config), body: { ...rest, model } };
    },

    embeddingsRequest({ input, dimensions, extra }, { model, config }) {
      const body: Record<string, unknown> = { ...extra, input, model, ...(dimensions !== undefined && { dimensions }) };
      if (options.embeddingsAsBase64) body.encoding_format = 'base64';
      return { ...target('embeddings', model, config), body };
    },

    parseEmbeddings: (json, body) => parseOpenAiEmbeddings(json, body.input.length),
  };
}

/** OpenAI-compatible kinds: the same wire, offering only the endpoints the kind serves. */
export function openAiCompatibleMediaAdapter(endpoints: readonly MediaEndpoint[]): MediaAdapter {
  return openAiMediaAdapter({ endpoints });
}

/** OpenAI itself: every endpoint; embeddings asked as base64. */
export const openAiOwnMediaAdapter = openAiMediaAdapter({ embeddingsAsBase64: true });

/**
 * Azure OpenAI: addressed by deployment (the model name is the deployment), with an
 * `api-version` query, as the chat adapter is.
 */
export const azureOpenAiMediaAdapter = openAiMediaAdapter({
  path: (deployment, endpointPath) => `/deployments/${encodeURIComponent(deployment)}${endpointPath}`,
  query: (config) => ({ 'api-version': typeof config.api_version === 'string' ? config.api_version : AZURE_DEFAULT_API_VERSION }),
  embeddingsAsBase64: true,
});
