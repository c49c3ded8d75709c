import type { ProviderKind } from '../kinds';
import type { ProviderAdapter } from '../types';
import { anthropicAdapter } from './anthropic';
import { googleAdapter } from './google';
import { azureOpenAiAdapter, openAiAdapter, openAiCompatibleAdapter } from './openai';

/** Which wire each kind speaks: three formats, the OpenAI one shared by most kinds. */
export const ADAPTERS: Record<ProviderKind, ProviderAdapter> = {
  openai: openAiAdapter,
  azure_openai: azureOpenAiAdapter,
  anthropic: anthropicAdapter,
  google: googleAdapter,
  mistral: openAiCompatibleAdapter,
  groq: openAiCompatibleAdapter,
  deepseek: openAiCompatibleAdapter,
  xai: openAiCompatibleAdapter,
  together: openAiCompatibleAdapter,
  fireworks: openAiCompatibleAdapter,
  cerebras: openAiCompatibleAdapter,
  perplexity: openAiCompatibleAdapter,
  openrouter: openAiCompatibleAdapter,
  custom: openAiCompatibleAdapter,
};
