import { singlePage } from '../paging';

/**
 * Provider kinds a connection can be of, and so the ids `allowed_providers` and
 * `routing.providers` may name. Data only: how each kind is reached and what a connection of
 * it may set. Chat and video adapters (issue 4/5) build on these entries.
 */
export type ProviderKindSpec = {
  name: string;
  /** Where requests go unless the connection sets `config.base_url`; null when the customer must type it. */
  defaultBaseUrl: string | null;
  /** How the credential is sent. */
  auth: 'bearer' | 'x-api-key' | 'api-key' | 'x-goog-api-key';
  /** Extra headers every call carries (API versions). */
  headers?: Record<string, string>;
  /** Path under the base URL that lists models: a cheap call that proves a credential. */
  validationPath: string;
  /**
   * Alternate hosts a connection may list: domains the provider owns (a host must be one of
   * them or a subdomain), `any` for a server whose URL the customer types, or none.
   */
  alternateHosts: readonly string[] | 'any';
  /** Whether the customer names the models (deployments, self-hosted servers). */
  takesModelMap: boolean;
};

export const PROVIDER_KIND_SPECS = {
  openai: { name: 'OpenAI', defaultBaseUrl: 'https://api.openai.com/v1', auth: 'bearer', validationPath: '/models', alternateHosts: ['openai.com'], takesModelMap: false },
  azure_openai: { name: 'Azure OpenAI', defaultBaseUrl: null, auth: 'api-key', validationPath: '/models', alternateHosts: 'any', takesModelMap: true },
  anthropic: { name: 'Anthropic', defaultBaseUrl: 'https://api.anthropic.com/v1', auth: 'x-api-key', headers: { 'anthropic-version': '2023-06-01' }, validationPath: '/models', alternateHosts: ['anthropic.com'], takesModelMap: false },
  google: { name: 'Google Gemini', defaultBaseUrl: 'https://generativelanguage.googleapis.com/v1beta', auth: 'x-goog-api-key', validationPath: '/models', alternateHosts: ['googleapis.com'], takesModelMap: false },
  mistral: { name: 'Mistral', defaultBaseUrl: 'https://api.mistral.ai/v1', auth: 'bearer', validationPath: '/models', alternateHosts: ['mistral.ai'], takesModelMap: false },
  groq: { name: 'Groq', defaultBaseUrl: 'https://api.groq.com/openai/v1', auth: 'bearer', validationPath: '/models', alternateHosts: [], takesModelMap: false },
  deepseek: { name: 'DeepSeek', defaultBaseUrl: 'https://api.deepseek.com/v1', auth: 'bearer', validationPath: '/models', alternateHosts: [], takesModelMap: false },
  xai: { name: 'xAI', defaultBaseUrl: 'https://api.x.ai/v1', auth: 'bearer', validationPath: '/models', alternateHosts: ['x.ai'], takesModelMap: false },
  together: { name: 'Together AI', defaultBaseUrl: 'https://api.together.xyz/v1', auth: 'bearer', validationPath: '/models', alternateHosts: ['together.xyz', 'together.ai'], takesModelMap: false },
  fireworks: { name: 'Fireworks AI', defaultBaseUrl: 'https://api.fireworks.ai/inference/v1', auth: 'bearer', validationPath: '/models', alternateHosts: [], takesModelMap: false },
  cerebras: { name: 'Cerebras', defaultBaseUrl: 'https://api.cerebras.ai/v1', auth: 'bearer', validationPath: '/models', alternateHosts: [], takesModelMap: false },
  perplexity: { name: 'Perplexity', defaultBaseUrl: 'https://api.perplexity.ai', auth: 'bearer', validationPath: '/models', alternateHosts: [], takesModelMap: false },
  openrouter: { name: 'OpenRouter', defaultBaseUrl: 'https://openrouter.ai/api/v1', auth: 'bearer', validationPath: '/models', alternateHosts: [], takesModelMap: false },
  custom: { name: 'OpenAI-compatible server', defaultBaseUrl: null, auth: 'bearer', validationPath: '/models', alternateHosts: 'any', takesModelMap: true },
} as const satisfies Record<string, ProviderKindSpec>;

export type ProviderKind = keyof typeof PROVIDER_KIND_SPECS;
export const PROVIDER_KINDS = Object.keys(PROVIDER_KIND_SPECS) as [ProviderKind, ...ProviderKind[]];

export function isProviderKind(id: string): id is ProviderKind {
  return Object.hasOwn(PROVIDER_KIND_SPECS, id);
}

export function kindSpec(kind: ProviderKind): ProviderKindSpec {
  return PROVIDER_KIND_SPECS[kind];
}

/** Headers that carry a credential the way the kind expects it. */
export function credentialHeaders(kind: ProviderKind, secret: string): Record<string, string> {
  const spec = kindSpec(kind);
  const auth = spec.auth === 'bearer' ? { authorization: `Bearer ${secret}` } : { [spec.auth]: secret };
  return Object.assign({}, spec.headers, auth);
}

/** The wire form served at `GET /manage/v1/provider_kinds` and `/console/providers/kinds`. */
export function presentProviderKinds() {
  // The list envelope (spec 4.4): every kind on one page, so never a next one.
  return singlePage(
    PROVIDER_KINDS.map((id) => {
      const spec = kindSpec(id);
      return {
        id,
        object: 'provider_kind',
        name: spec.name,
        default_base_url: spec.defaultBaseUrl,
        requires_base_url: spec.defaultBaseUrl === null,
        alternate_hosts: spec.alternateHosts === 'any' ? { allowed: true, domains: null } : { allowed: spec.alternateHosts.length > 0, domains: spec.alternateHosts },
        takes_model_map: spec.takesModelMap,
      };
    }),
  );
}
