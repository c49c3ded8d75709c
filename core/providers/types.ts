import type { FormData } from 'undici';

/**
 * The one OpenAI-shaped vocabulary every adapter maps to and from. Adapters are data plus pure
 * functions over these types; the HTTP call, failover and cost live elsewhere.
 */

export type ContentPart = { type: string; text?: string; image_url?: { url: string; detail?: string } } & Record<string, unknown>;

export type ToolCall = { id: string; type: 'function'; function: { name: string; arguments: string } };

export type ChatMessage = {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content?: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
} & Record<string, unknown>;

export type ToolDefinition = { type: 'function'; function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean } };

/**
 * A request in a provider's own wire, as a client protocol sent it (Anthropic Messages): sent
 * as it came by the adapter of that wire, with the chat body's model, cap and drops applied, so
 * what only that wire has (`cache_control`, thinking blocks and signatures) reaches it. Keyed by
 * a symbol, so the body's JSON (cache keys, estimates, logs) never includes it.
 */
export const NATIVE_REQUEST: unique symbol = Symbol('native request');
export type NativeRequest = {
  /** Anthropic Messages (served natively by Anthropic), or OpenAI Responses (by OpenAI). */
  wire: 'anthropic-messages' | 'openai-responses';
  body: Record<string, unknown>;
  /** The client's `anthropic-beta` features; sent only those the connection allows (`config.anthropic_betas`). */
  betas?: string[];
  /**
   * What of the request the chat body's translation does not carry (thinking, built-in tools,
   * reasoning items...): such a request is not answered from the response cache, whose key is
   * the translation and whose answers are kept translated (core/response-cache/policy.ts).
   */
  leftOut?: readonly string[];
};

/**
 * Marks the chat body's `reasoning_effort` as a client protocol's translation (Messages'
 * `output_config.effort`), under the name the client used: sent only to a candidate whose wire
 * takes a reasoning effort and whose model reasons (core/chat/prepare.ts), otherwise left out
 * and named among the dropped. A chat client's own `reasoning_effort` carries no mark and is
 * forwarded as any other field. A symbol, so JSON never includes it.
 */
export const TRANSLATED_EFFORT: unique symbol = Symbol('translated reasoning effort');

/** What reaches an adapter: the client's body without the gateway's own extension fields. */
export type ChatBody = {
  [NATIVE_REQUEST]?: NativeRequest;
  [TRANSLATED_EFFORT]?: string;
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string | string[];
  tools?: ToolDefinition[];
  tool_choice?: 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };
  response_format?: { type: string; json_schema?: { name?: string; schema?: Record<string, unknown>; strict?: boolean } };
  seed?: number;
  user?: string;
  stream_options?: { include_usage?: boolean };
  top_k?: number;
  n?: number;
  logprobs?: boolean;
  top_logprobs?: number;
  logit_bias?: Record<string, number>;
  parallel_tool_calls?: boolean;
} & Record<string, unknown>;

/** A parameter a wire has no equivalent for (spec 4.1): a 400 naming it, never a silent drop. */
export type ParamRefusal = { param: string; message: string };

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

export type Usage = {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
  /** A charge the provider itself reported (OpenRouter and others), in US dollars. */
  provider_cost?: number;
  /**
   * Prompt tokens written to the provider's prompt cache (Anthropic), inside `prompt_tokens`:
   * billed above the input rate, 1.25x for a 5-minute entry and 2x for a 1-hour one. `ttl_1h`
   * is the part written for an hour. The gateway's own, for pricing: never on a client's wire.
   */
  cache_write_tokens?: CacheWrites;
};

/** Prompt tokens written to a prompt cache: all of them, and the part kept for an hour. */
export type CacheWrites = { total: number; ttl_1h: number };

export type Choice = {
  index: number;
  message: { role: 'assistant'; content: string | null; tool_calls?: ToolCall[]; refusal?: string | null };
  finish_reason: FinishReason;
  /** Token log probabilities, as the OpenAI wire returns them when `logprobs` was asked for. */
  logprobs?: unknown;
};

export type ChatResult = {
  model: string | null; choices: Choice[]; usage: Usage | null;
  /** The answer in the provider's own wire, when the request went in it (NATIVE_REQUEST): what a native client protocol answers with. */
  native?: Record<string, unknown>;
};

/** A piece of a streamed tool call: the first carries id and name, later ones argument text. */
export type ToolCallDelta = { index: number; id?: string; type?: 'function'; function?: { name?: string; arguments?: string } };

export type ChunkChoice = {
  index: number;
  delta: { role?: 'assistant'; content?: string; tool_calls?: ToolCallDelta[] };
  finish_reason: FinishReason | null;
  logprobs?: unknown;
};

/** What one upstream stream event becomes. */
export type StreamOutput =
  | { type: 'delta'; choices: ChunkChoice[] }
  | { type: 'usage'; usage: Partial<Usage> }
  | { type: 'model'; model: string }
  | { type: 'done' }
  | { type: 'error'; failure: ProviderFailure }
  /** The provider's own event, passed along beside its translation when the request was native (NATIVE_REQUEST). */
  | { type: 'native'; event: string; data: string };

export const FAILURE_KINDS = ['rate_limit', 'server_error', 'timeout', 'connection', 'credential', 'moderation'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

/**
 * A provider's refusal in our terms: one of the spec's failure kinds (which drive failover),
 * an invalid request (the provider's 400, surfaced to the client), a parameter the model
 * refuses (dropped and retried once), or a model this connection cannot serve.
 */
export type ProviderFailure =
  /** `outcomeUnknown`: the request may have reached the provider (a connection cut after it was sent). */
  | { kind: FailureKind; message: string; status?: number; retryAfterSeconds?: number; outcomeUnknown?: boolean }
  | { kind: 'invalid_request'; message: string; status: number }
  | { kind: 'unsupported_parameter'; message: string; status: number; param: string }
  | { kind: 'model_not_served'; message: string; status: number };

/**
 * One HTTP call to a provider: a path under the connection's base URL (or an absolute URL). The
 * body is JSON, or a multipart form (disk-backed, so sending it again to an alternate host or
 * with a pooled credential reads the same bytes again).
 */
export type UpstreamRequest = {
  method?: 'GET' | 'POST' | 'DELETE'; path: string; query?: Record<string, string>; body?: Record<string, unknown> | FormData; headers?: Record<string, string>;
  /** Never sent to an alternate host after a failure that may have reached the first (a video submit: a second render). */
  sendOnce?: boolean;
};

export type BuildOptions = {
  /** The model name the provider knows (after a connection's model map). */
  model: string;
  stream: boolean;
  /** Sent as the output cap when the kind requires one and the client gave none. */
  defaultMaxTokens: number;
  /** Connection settings (`api_version` for Azure). */
  config: Record<string, unknown>;
};

export type StreamDecoder = (event: { event?: string; data: string }) => StreamOutput[];

export interface ProviderAdapter {
  /** The client protocol whose requests this wire takes as they came (NATIVE_REQUEST), if any. */
  nativeWire?: NativeRequest['wire'];
  /** Sampling parameters this wire has no place for: dropped and named in X-GW-Params-Dropped. */
  unsupportedSampling: readonly string[];
  /** Whether this wire takes Chat Completions' `reasoning_effort` (for the models that reason). */
  reasoningEffort?: boolean;
  /**
   * Fields of a native request (NATIVE_REQUEST, this wire's own) this connection is not sent:
   * those that only a beta the connection does not allow turns on. Left out by `buildRequest`
   * and named among the dropped.
   */
  nativeLeftOut?(native: NativeRequest, config: Record<string, unknown>): readonly string[];
  /**
   * The first parameter of the (prepared) body this wire cannot carry, or null. Such a
   * candidate is skipped before any call; when every candidate refuses, the request is a 400
   * naming the parameter (see core/chat/execute.ts).
   */
  refusal(body: ChatBody, model: string): ParamRefusal | null;
  buildRequest(body: ChatBody, options: BuildOptions): UpstreamRequest;
  /** `native`: the request was sent in this wire's own form (its answer is that wire's, kept as `native`). */
  parseResponse(json: unknown, options?: { native?: boolean }): ChatResult;
  /** `native`: the request was sent in this wire's own form; the decoder passes each event along too. */
  createStreamDecoder(options?: { native?: boolean }): StreamDecoder;
  classifyError(status: number, body: unknown, headers: Record<string, string | string[] | undefined>): ProviderFailure;
}
