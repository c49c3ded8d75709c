/**
 * A guardrail policy (spec 2.6) has no row of its own: it is stored on the organization's
 * settings, a project or a key, so its `version` is its parent's and changing the parent moves it.
 */
export const GUARDRAIL_STAGES = ['input', 'output', 'both'] as const;
export const GUARDRAIL_ACTIONS = ['redact', 'flag', 'block'] as const;
export const ENGINE_ERROR_ACTIONS = ['block', 'allow'] as const;

export type GuardrailRule = {
  detector: string;
  stage: (typeof GUARDRAIL_STAGES)[number];
  action: (typeof GUARDRAIL_ACTIONS)[number];
  /** The detector's own options (`words`, `patterns`, ...), checked by the guardrail engine. */
  [option: string]: unknown;
};

export type GuardrailPolicy = {
  enabled: boolean;
  on_engine_error: (typeof ENGINE_ERROR_ACTIONS)[number];
  rules: GuardrailRule[];
};

/** The organization's response cache switch (issue 12): off until an owner turns it on. */
export type ResponseCacheSettings = { enabled: boolean; default_ttl_seconds: number };
export const DEFAULT_RESPONSE_CACHE: ResponseCacheSettings = { enabled: false, default_ttl_seconds: 3600 };

/** What the request log keeps of a guardrail's outcome: counts, never matched text. */
export type GuardrailOutcome = { action: 'redacted' | 'flagged' | 'blocked'; findings: Array<{ detector: string; stage: 'input' | 'output'; action: string; count: number }> };
