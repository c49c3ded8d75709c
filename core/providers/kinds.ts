/**
 * Provider kinds a connection can be of, and so the ids `allowed_providers` and
 * `routing.providers` may name. Adapters for each arrive with the chat issue; the ids are
 * fixed here because keys are validated against them from the start.
 */
export const PROVIDER_KINDS = [
  'openai', 'azure_openai', 'anthropic', 'google', 'mistral', 'groq', 'deepseek', 'xai', 'together',
  'fireworks', 'cerebras', 'perplexity', 'openrouter', 'custom',
] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

export function isProviderKind(id: string): id is ProviderKind {
  return (PROVIDER_KINDS as readonly string[]).includes(id);
}
