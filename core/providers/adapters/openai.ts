import { classifyByStatus } from '../errors';
import { NATIVE_REQUEST, type ChatResult, type ChunkChoice, type NativeRequest, type ProviderAdapter, type StreamOutput, type Usage } from '../types';
import { nativeResponsesRequest, parseResponsesObject, responsesStreamDecoder } from './openai-responses';

type OpenAiUsage = {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
  cost?: number;
};

export function mapOpenAiUsage(u: OpenAiUsage | null | undefined): Usage | null {
  if (!u) return null;
  const prompt = u.prompt_tokens ?? 0;
  const completion = u.completion_tokens ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: u.total_tokens ?? prompt + completion,
    ...(u.prompt_tokens_details?.cached_tokens !== undefined && { prompt_tokens_details: { cached_tokens: u.prompt_tokens_details.cached_tokens } }),
    ...(u.completion_tokens_details?.reasoning_tokens !== undefined && { completion_tokens_details: { reasoning_tokens: u.completion_tokens_details.reasoning_tokens } }),
    ...(typeof u.cost === 'number' && { provider_cost: u.cost }),
  };
}

/**
 * OpenAI Chat Completions: the wire of `openai`, every OpenAI-compatible kind and `custom`.
 * Requests pass through nearly untouched (unknown fields included): every spec 4.1 parameter
 * is native here, so nothing is refused up front; a compatible server that refuses one answers
 * its own 400. Streams always ask for usage so cost can be settled, and the gateway drops that
 * chunk if the client did not ask. `logprobs` come back on each choice and chunk choice.
 */
export function openAiWireAdapter(options: {
  path?: (model: string) => string;
  query?: (config: Record<string, unknown>) => Record<string, string>;
  unsupportedSampling?: readonly string[];
  /** OpenAI itself also takes Responses requests as they came (`/responses`, openai-responses.ts). */
  nativeWire?: NativeRequest['wire'];
  /** The server documents `reasoning_effort` for its reasoning models (OpenAI's own, Azure's). */
  reasoningEffort?: boolean;
} = {}): ProviderAdapter {
  return {
    nativeWire: options.nativeWire,
    reasoningEffort: options.reasoningEffort,

    unsupportedSampling: options.unsupportedSampling ?? [],

    refusal: () => null,

    buildRequest(body, { model, stream, config }) {
      const native = body[NATIVE_REQUEST];
      if (native && native.wire === options.nativeWire) return { path: '/responses', body: nativeResponsesRequest(native.body, body, model, stream) };
      // The rest is a new object, so it takes the fields in place (and a spread-first literal
      // would gain them the slow way, docs/decisions.md).
      const { stream_options: streamOptions, ...sent }: Record<string, unknown> = body;
      sent.model = model;
      sent.stream = stream;
      if (stream) sent.stream_options = Object.assign({}, streamOptions, { include_usage: true });
      return { path: options.path ? options.path(model) : '/chat/completions', query: options.query?.(config), body: sent };
    },

    parseResponse(json, parse): ChatResult {
      if (parse?.native) return parseResponsesObject(json);
      const r = json as { model?: string; choices?: ChatResult['choices']; usage?: OpenAiUsage };
      return {
        model: r.model ?? null,
        choices: (r.choices ?? []).map((c, i) => ({
          index: c.index ?? i,
          message: {
            role: 'assistant',
            content: c.message?.content ?? null,
            ...(c.message?.tool_calls?.length ? { tool_calls: c.message.tool_calls } : {}),
            ...(c.message?.refusal ? { refusal: c.message.refusal } : {}),
          },
          finish_reason: c.finish_reason ?? 'stop',
          ...(c.logprobs ? { logprobs: c.logprobs } : {}),
        })),
        usage: mapOpenAiUsage(r.usage),
      };
    },

    createStreamDecoder(decode) {
      if (decode?.native) return responsesStreamDecoder();
      return ({ data }): StreamOutput[] => {
        if (data.trim() === '[DONE]') return [{ type: 'done' }];
        const chunk = JSON.parse(data) as { model?: string; choices?: ChunkChoice[]; usage?: OpenAiUsage | null; error?: { message?: string; code?: string } };
        if (chunk.error) return [{ type: 'error', failure: classifyByStatus(500, chunk, {}) }];
        const out: StreamOutput[] = [];
        if (chunk.model) out.push({ type: 'model', model: chunk.model });
        if (chunk.choices?.length) out.push({ type: 'delta', choices: chunk.choices.map((c) => ({ index: c.index, delta: c.delta ?? {}, finish_reason: c.finish_reason ?? null, ...(c.logprobs ? { logprobs: c.logprobs } : {}) })) });
        const usage = mapOpenAiUsage(chunk.usage);
        if (usage) out.push({ type: 'usage', usage });
        return out;
      };
    },

    classifyError(status, body, headers) {
      const err = (body as { error?: { param?: string | null; code?: string | null } } | null)?.error;
      return classifyByStatus(status, body, headers, { param: err?.param, code: err?.code });
    },
  };
}

/**
 * OpenAI itself: `top_k` is no parameter of its Chat Completions, so it is dropped and named; a
 * Responses request goes to its own `/responses` as it came. Its reasoning models take
 * `reasoning_effort`.
 */
export const openAiAdapter = openAiWireAdapter({ unsupportedSampling: ['top_k'], nativeWire: 'openai-responses', reasoningEffort: true });

/**
 * OpenAI-compatible kinds and `custom`: many of these servers take `top_k`, so it is sent. Which
 * of them take `reasoning_effort`, and for which models, differs from server to server, so a
 * translated effort is not sent to them.
 */
export const openAiCompatibleAdapter = openAiWireAdapter();

/** Azure OpenAI: the same wire, addressed by deployment, with an `api-version` query. */
export const azureOpenAiAdapter = openAiWireAdapter({
  unsupportedSampling: ['top_k'],
  reasoningEffort: true,
  path: (deployment) => `/deployments/${encodeURIComponent(deployment)}/chat/completions`,
  query: (config) => ({ 'api-version': typeof config.api_version === 'string' ? config.api_version : '2024-10-21' }),
});
