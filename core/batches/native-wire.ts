import type { ProviderKind } from '../providers/kinds';

/**
 * The providers' own batch APIs (issue 56), as data and pure transforms: what the gateway
 * submits for a batch it runs natively, how it reads the provider's status, and how each line
 * of the provider's results maps back to an item of the batch. The HTTP calls are the
 * activities' (activities/native-batch.ts); these are unit-tested on fixtures.
 *
 * Every item goes to the provider under its line number (`l<line>`), not the client's
 * `custom_id`: ours is unique and fits both providers' rules (Anthropic takes 64 characters of
 * `[a-zA-Z0-9_-]`), and the answer is mapped back to the line, whose `custom_id` the output
 * carries as the client gave it.
 */
export type NativeBatchWire = 'openai' | 'anthropic';

/** Where a batch run natively goes: the route's first candidate, as planned when its input was validated. */
export type NativeBatchPlan = {
  /** The model (or route) the batch's items name. */
  model: string;
  /** The path every item calls (`/v1/chat/completions`, `/v1/embeddings`, `/v1/messages`). */
  endpoint: string;
  /** The route it named, when it named one (the request log's `route_slug`). */
  routeSlug?: string | null;
  connectionId: string; kind: ProviderKind; wire: NativeBatchWire; upstreamModel: string; modelId: string;
};

/** A native batch's progress, kept on its row (`batches.native`) so every step is resumable. */
export type NativeBatchState = {
  plan: NativeBatchPlan;
  /** How many parts (chunks, in order) hold their worst case; the parts after them were refused. */
  heldParts?: number;
  /** The answer a spend limit gave the first part it had no room for; its items and the rest end with it. */
  refusal?: { statusCode: number; body: unknown } | null;
  /** Set just before the provider's batch is created: a retry that finds it without an id cannot know whether the provider took it. */
  submitting?: boolean;
  providerBatchId?: string | null;
  /** OpenAI: the input file uploaded to the provider, deleted there once the results are read. */
  providerInputFileId?: string;
  providerStatus?: string;
  /** Requests the provider has answered so far (its status's counts): the batch's progress until its results are read. */
  providerDone?: number;
  /** How many items the held parts hold (what the provider batch was sent), to check its results against. */
  submittedItems?: number;
  /** The results were read and recorded, and the batch ends so: a retry answers this (the provider's copies may be deleted). */
  collected?: 'completed' | 'cancelled' | 'expired';
  /** The provider was asked to cancel (our batch's cancel, or its window ran out). */
  cancelSent?: 'cancelled' | 'expired';
};

/**
 * Which provider batch API takes a batch of this endpoint on a connection of this kind; null:
 * none (the gateway runs it). OpenAI's runs chat completions and embeddings (its Responses are
 * run by the gateway: their answers are priced and logged through the Responses translation).
 */
export function nativeBatchWire(kind: ProviderKind, endpoint: string): NativeBatchWire | null {
  if ((kind === 'openai' || kind === 'azure_openai') && (endpoint === '/v1/chat/completions' || endpoint === '/v1/embeddings')) return 'openai';
  if (kind === 'anthropic' && endpoint === '/v1/messages') return 'anthropic';
  return null;
}

/**
 * The published batch discount: OpenAI's Batch API and Anthropic's Message Batches each bill
 * input and output at half the standard rates (openai.com/api/pricing "Batch API: save 50%";
 * docs.anthropic.com "Batch processing: 50% discount"). The price data carries one standard
 * rate per model, so a batch's items are priced at this multiple of it.
 */
export const NATIVE_BATCH_PRICE_MULTIPLIER = 0.5;

/** A standard-rate cost at the batch rate, to the nano-dollar. */
export const atBatchRate = (usd: number) => Math.round(usd * NATIVE_BATCH_PRICE_MULTIPLIER * 1e9) / 1e9;

export const providerCustomId = (line: number) => `l${line}`;

/** The line a provider's `custom_id` stands for, or null when it is not one we sent. */
export function lineOfCustomId(customId: unknown): number | null {
  if (typeof customId !== 'string') return null;
  const match = /^l([1-9][0-9]*)$/.exec(customId);
  return match ? Number(match[1]) : null;
}

/**
 * The gateway's own request fields (spec 4.1 extensions), never sent to a provider. A Messages
 * request's `metadata` is Anthropic's own and goes as it came.
 */
const GATEWAY_FIELDS: ReadonlySet<string> = new Set(['routing', 'fallbacks', 'logging', 'cache', 'metadata']);
/** Extension fields that ask for the gateway's routing or cache: a batch whose items carry one is run by the gateway. */
export const GATEWAY_RUN_FIELDS: readonly string[] = ['routing', 'fallbacks', 'cache'];

/** One item as submitted: its body with the model the connection knows, without the gateway's fields or a stream. */
export function submittedBody(body: Record<string, unknown>, upstreamModel: string, endpoint: string): Record<string, unknown> {
  const sent: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(body)) {
    if (name === 'stream' || name === 'stream_options') continue;
    if (GATEWAY_FIELDS.has(name) && !(name === 'metadata' && endpoint === '/v1/messages')) continue;
    sent[name] = value;
  }
  sent.model = upstreamModel;
  return sent;
}

/** The endpoint as the provider's batch API names it: Azure OpenAI's without `/v1`. */
export const providerEndpoint = (endpoint: string, azure: boolean) => (azure ? endpoint.replace(/^\/v1/, '') : endpoint);

/** An OpenAI (or Azure OpenAI) batch input line. */
export function openAIInputLine(line: number, body: Record<string, unknown>, upstreamModel: string, endpoint: string, azure: boolean): string {
  return JSON.stringify({ custom_id: providerCustomId(line), method: 'POST', url: providerEndpoint(endpoint, azure), body: submittedBody(body, upstreamModel, endpoint) });
}

/** An Anthropic Message Batches request. */
export function anthropicRequest(line: number, body: Record<string, unknown>, upstreamModel: string): Record<string, unknown> {
  return { custom_id: providerCustomId(line), params: submittedBody(body, upstreamModel, '/v1/messages') };
}

/** What a provider's batch object says, in the gateway's terms. */
export type NativeStatus = {
  /** Whether the provider is done with it: its results (those it has) are final. */
  ended: boolean;
  /** OpenAI's status, or Anthropic's `processing_status`. */
  status: string;
  /** Requests answered so far (well or with an error), for progress. */
  done: number;
  /** OpenAI: the output and error files; Anthropic: the results URL. */
  outputFileId: string | null;
  errorFileId: string | null;
  resultsUrl: string | null;
  /** Why the provider failed the whole batch (OpenAI `errors.data`), for the batch's error. */
  failure: string | null;
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const str = (v: unknown) => (typeof v === 'string' && v ? v : null);

const OPENAI_ENDED = new Set(['completed', 'failed', 'expired', 'cancelled']);

export function nativeStatus(wire: NativeBatchWire, json: unknown): NativeStatus {
  const batch = isObject(json) ? json : {};
  if (wire === 'openai') {
    const counts = isObject(batch.request_counts) ? batch.request_counts : {};
    const errors = isObject(batch.errors) && Array.isArray(batch.errors.data) ? (batch.errors.data as unknown[]) : [];
    const status = String(batch.status ?? '');
    return {
      ended: OPENAI_ENDED.has(status), status, done: num(counts.completed) + num(counts.failed),
      outputFileId: str(batch.output_file_id), errorFileId: str(batch.error_file_id), resultsUrl: null,
      failure: status === 'failed' ? errors.map((e) => (isObject(e) ? String(e.message ?? e.code ?? '') : '')).filter(Boolean).join('; ').slice(0, 500) || 'the provider failed the batch' : null,
    };
  }
  const counts = isObject(batch.request_counts) ? batch.request_counts : {};
  const status = String(batch.processing_status ?? '');
  return {
    ended: status === 'ended', status, done: num(counts.succeeded) + num(counts.errored),
    outputFileId: null, errorFileId: null, resultsUrl: str(batch.results_url), failure: null,
  };
}

/** One line of a provider's results, for the item it answers. */
export type NativeResult =
  | { line: number; answered: true; status: number; body: unknown }
  /** Never run by the provider: the batch was cancelled or its window ran out. */
  | { line: number; answered: false; unrun: 'cancelled' | 'expired' };

/** HTTP statuses of Anthropic's error types, for an errored request's recorded status. */
const ANTHROPIC_ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400, authentication_error: 401, permission_error: 403, not_found_error: 404,
  request_too_large: 413, rate_limit_error: 429, api_error: 500, overloaded_error: 529,
};

/** A results line, or null when it is not one (blank, not JSON, not an id we sent). */
export function nativeResult(wire: NativeBatchWire, text: string): NativeResult | null {
  if (text.trim() === '') return null;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isObject(json)) return null;
  const line = lineOfCustomId(json.custom_id);
  if (line === null) return null;
  if (wire === 'openai') {
    if (isObject(json.response)) return { line, answered: true, status: num(json.response.status_code) || 500, body: json.response.body ?? null };
    const code = isObject(json.error) ? json.error.code : null;
    return { line, answered: false, unrun: code === 'batch_cancelled' ? 'cancelled' : 'expired' };
  }
  const result = isObject(json.result) ? json.result : {};
  if (result.type === 'succeeded') return { line, answered: true, status: 200, body: result.message ?? null };
  if (result.type === 'errored') {
    const error = isObject(result.error) ? result.error : {};
    const type = isObject(error.error) ? String(error.error.type ?? '') : '';
    return { line, answered: true, status: ANTHROPIC_ERROR_STATUS[type] ?? 500, body: error };
  }
  return { line, answered: false, unrun: result.type === 'canceled' ? 'cancelled' : 'expired' };
}
