import type { ProviderKind } from '../kinds';
import { googleMediaAdapter } from './google';
import { azureOpenAiMediaAdapter, openAiCompatibleMediaAdapter, openAiOwnMediaAdapter } from './openai';
import { MEDIA_ENDPOINTS, type MediaAdapter, type MediaEndpoint } from './types';

/**
 * Which image, audio and embeddings endpoints each OpenAI-compatible kind serves on its base URL, by the
 * OpenAI paths. Data: a kind gains an endpoint here and nowhere else. A kind with none (chat-only
 * servers, Anthropic) has no media adapter at all, so its connections are skipped as candidates.
 */
export const COMPATIBLE_MEDIA_ENDPOINTS: Record<Exclude<ProviderKind, 'openai' | 'azure_openai' | 'google'>, readonly MediaEndpoint[]> = {
  groq: ['audio.transcriptions', 'audio.speech'],
  together: ['images.generations', 'embeddings'],
  xai: ['images.generations'],
  // A server the customer runs: it may serve any of them; one that does not answers its own 404.
  custom: MEDIA_ENDPOINTS,
  mistral: ['embeddings'],
  deepseek: [],
  fireworks: ['embeddings'],
  cerebras: [],
  perplexity: [],
  openrouter: [],
  anthropic: [],
};

const compatible = Object.fromEntries(
  Object.entries(COMPATIBLE_MEDIA_ENDPOINTS)
    .filter(([, endpoints]) => endpoints.length > 0)
    .map(([kind, endpoints]) => [kind, openAiCompatibleMediaAdapter(endpoints)]),
) as Partial<Record<ProviderKind, MediaAdapter>>;

/** The media adapter of each kind that serves any image or audio endpoint. */
export const MEDIA_ADAPTERS: Partial<Record<ProviderKind, MediaAdapter>> = {
  openai: openAiOwnMediaAdapter,
  azure_openai: azureOpenAiMediaAdapter,
  google: googleMediaAdapter,
  ...compatible,
};

/** The adapter to reach `endpoint` on a connection of `kind`, or null when the kind does not serve it. */
export function mediaAdapterFor(kind: ProviderKind, endpoint: MediaEndpoint): MediaAdapter | null {
  const adapter = MEDIA_ADAPTERS[kind];
  return adapter?.endpoints.includes(endpoint) ? adapter : null;
}
