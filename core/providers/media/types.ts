import type { FieldOverrides } from '../../http/multipart';
import type { MediaTokenUsage } from '../../pricing/media-cost';
import type { UpstreamRequest } from '../types';

/**
 * The image and audio wires (issue 14), like the chat adapters: data plus pure transforms. The
 * HTTP call, failover, storage and cost live elsewhere (api/gateway/media.ts).
 */
export const MEDIA_ENDPOINTS = ['images.generations', 'images.edits', 'audio.transcriptions', 'audio.speech', 'embeddings'] as const;
export type MediaEndpoint = (typeof MEDIA_ENDPOINTS)[number];

export const TRANSCRIPTION_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const;
export type TranscriptionFormat = (typeof TRANSCRIPTION_FORMATS)[number];

export type MediaBuildOptions = {
  /** The model name the provider knows (after a connection's model map; Azure's deployment). */
  model: string;
  /** Connection settings (`api_version` for Azure). */
  config: Record<string, unknown>;
  /**
   * The model as the client named it (`<vendor>/<name>`): what family it is when the upstream
   * name does not say (an Azure deployment named `images-prod` serving gpt-image-1).
   */
  modelId?: string;
};

/**
 * A multipart upstream call: the client's spooled body sent again (core/http/multipart.ts
 * multipartForward) with these fields replaced, or removed where null.
 */
export type MultipartUpstream = Omit<UpstreamRequest, 'body' | 'method'> & { overrides: FieldOverrides };

/** One image as the gateway holds it: the provider is always asked for base64, never a link. */
export type ImageOut = { b64_json: string; mime_type: string; revised_prompt?: string };

export type ImagesResult = {
  /** Unix seconds, as the provider said (now when it did not). */
  created: number;
  images: ImageOut[];
  /** Token usage where the model bills by tokens (gpt-image-1), else null. */
  usage: MediaTokenUsage | null;
  /** What gpt-image models report of the settings used (`background`, `output_format`, `quality`, `size`), passed on. */
  settings: Record<string, unknown>;
};

export type TranscriptionResult = {
  /** JSON formats: the provider's object as sent; text formats (text, srt, vtt): the text. */
  body: Record<string, unknown> | string;
  /** `usage` as the provider reported it (tokens for gpt-4o transcribe models, `{type: 'duration'}` for whisper), else null. */
  usage: MediaTokenUsage | { type: 'duration'; seconds: number } | null;
};

/**
 * An embeddings request as the gateway holds it: the inputs always as a list (text, or token
 * ids), the vector length asked, and the client's other OpenAI fields (`user`) to pass on.
 */
export type EmbeddingsBody = {
  input: string[] | number[][];
  dimensions?: number;
  /** The client's other fields, passed on where the wire is OpenAI's. */
  extra: Record<string, unknown>;
};

export type EmbeddingsResult = {
  /** One vector per input, in input order (float32, as every provider computes them). */
  vectors: Float32Array[];
  /** Input tokens as the provider counted them; null when it says none (Gemini). */
  promptTokens: number | null;
};

/** The JSON body of an image generation or a speech request, without the gateway's own fields. */
export type MediaJsonBody = Record<string, unknown> & { model: string };

export interface MediaAdapter {
  /** The endpoints this wire offers; a candidate whose kind lacks the endpoint is skipped. */
  endpoints: readonly MediaEndpoint[];
  /** `images.generations`: the upstream call, asking base64 whatever the client asked. */
  imagesRequest(body: MediaJsonBody, options: MediaBuildOptions): UpstreamRequest;
  /** An images answer (generation or edit) in our terms. */
  parseImages(json: unknown): ImagesResult;
  /** `images.edits`: the path and field overrides (the model name; base64 asked for). */
  editRequest(fields: Record<string, string | string[]>, options: MediaBuildOptions): MultipartUpstream;
  /**
   * `audio.transcriptions`: the path and field overrides: the model name, and `response_format`
   * when the answer is asked in another format than the client's, one that states the audio's
   * length (transcript-formats.ts); the gateway renders the client's format from it.
   */
  transcriptionRequest(fields: Record<string, string | string[]>, options: MediaBuildOptions): MultipartUpstream;
  /** A transcription answer in the format it was asked upstream in, read from its text. */
  parseTranscription(format: TranscriptionFormat, text: string): TranscriptionResult;
  /** `audio.speech`: the upstream call; its answer is the audio bytes, passed on as they stream. */
  speechRequest(body: MediaJsonBody, options: MediaBuildOptions): UpstreamRequest;
  /** `embeddings`: the upstream call; null when this wire cannot take the input (its reason in `refusal`). */
  embeddingsRequest(body: EmbeddingsBody, options: MediaBuildOptions): UpstreamRequest | { refusal: string };
  /** An embeddings answer to `body` in our terms; throws when it is not one vector per input. */
  parseEmbeddings(json: unknown, body: EmbeddingsBody): EmbeddingsResult;
}
