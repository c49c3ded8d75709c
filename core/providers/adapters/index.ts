import type { ProviderKind } from '../kinds';
import type { ProviderAdapter } from '../types';
import { anthropicAdapter } from './anthropic';
import { googleAdapter } from './google';
import { azureOpenAiAdapter, openAiAdapter } from './openai';

/** Which wire each kind speaks: three formats, the OpenAI one shared by most kinds. */
export const ADAPTERS: Record<ProviderKind, ProviderAdapter> = {
  openai: openAiAdapter,
  azure_openai: azureOpenAiAdapter,
  anthropic: anthropicAdapter,
  google: googleAdapter,
  mistral: openAiAdapter,
  groq: openAiAdapter,
  deepseek: openAiAdapter,
  xai: openAiAdapter,
  together: openAiAdapter,
  fireworks: openAiAdapter,
  cerebras: openAiAdapter,
  perplexity: openAiAdapter,
  openrouter: openAiAdapter,
  custom: openAiAdapter,
};
