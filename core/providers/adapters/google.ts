import { safeJson, textOf } from './message-text';
import { classifyByStatus, providerMessage } from '../errors';
import type { ChatBody, ChatMessage, ChatResult, FinishReason, ParamRefusal, ProviderAdapter, StreamOutput, ToolCall, Usage } from '../types';

type Part = { text?: string; inlineData?: { mimeType: string; data: string }; fileData?: { mimeType?: string; fileUri: string }; functionCall?: { name: string; args?: unknown }; functionResponse?: { name: string; response: unknown }; thought?: boolean };
type Content = { role: 'user' | 'model'; parts: Part[] };
type GeminiUsage = { promptTokenCount?: number; candidatesTokenCount?: number; totalTokenCount?: number; cachedContentTokenCount?: number; thoughtsTokenCount?: number };
type GeminiResponse = { candidates?: Array<{ content?: { parts?: Part[] }; finishReason?: string; index?: number }>; usageMetadata?: GeminiUsage; modelVersion?: string; promptFeedback?: { blockReason?: string } };

/**
 * OpenAI fields that become `generationConfig` (`n` as `candidateCount`, `response_format` as
 * `responseMimeType`/`responseJsonSchema`), `tools` or `toolConfig`; refused up front where
 * Gemini has no equivalent (`user`, `parallel_tool_calls: false`, `n` > 8, see `refusal`);
 * handled by the gateway (`stream_options`); or sampling parameters without an equivalent,
 * dropped and named (`unsupportedSampling`).
 */
const NOT_FORWARDED = ['model', 'messages', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'stop', 'seed',
  'frequency_penalty', 'presence_penalty', 'response_format', 'tools', 'tool_choice', 'user', 'n', 'parallel_tool_calls', 'logprobs', 'top_logprobs', 'logit_bias'];



/** OpenAI messages to Gemini contents; tool results name their function, found from the call. */
export function toGeminiContents(messages: ChatMessage[]): { systemInstruction?: { parts: Part[] }; contents: Content[] } {
  const system = messages.filter((m) => m.role === 'system' || m.role === 'developer').map((m) => textOf(m.content)).join('\n\n');
  const callNames = new Map<string, string>();
  const contents: Content[] = [];
  const push = (role: Content['role'], parts: Part[]) => {
    const last = contents.at(-1);
    if (last && last.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  };
  for (const m of messages) {
    if (m.role === 'system' || m.role === 'developer') continue;
    if (m.role === 'assistant') {
      const parts: Part[] = [];
      const text = textOf(m.content);
      if (text) parts.push({ text });
      for (const call of m.tool_calls ?? []) {
        callNames.set(call.id, call.function.name);
        parts.push({ functionCall: { name: call.function.name, args: safeJson(call.function.arguments) } });
      }
      push('model', parts.length ? parts : [{ text: '' }]);
    } else if (m.role === 'tool') {
      const name = callNames.get(m.tool_call_id ?? '') ?? m.name ?? 'tool';
      push('user', [{ functionResponse: { name, response: { content: textOf(m.content) } } }]);
    } else if (typeof m.content === 'string') {
      push('user', [{ text: m.content }]);
    } else {
      push('user', (m.content ?? []).map((p): Part => {
        if (p.type === 'image_url' && p.image_url) {
          const data = /^data:([^;]+);base64,(.*)$/.exec(p.image_url.url);
          return data ? { inlineData: { mimeType: data[1]!, data: data[2]! } } : { fileData: { fileUri: p.image_url.url } };
        }
        return { text: p.text ?? '' };
      }));
    }
  }
  return system ? { systemInstruction: { parts: [{ text: system }] }, contents } : { contents };
}

function generationConfig(body: ChatBody): Record<string, unknown> {
  const stop = body.stop === undefined ? undefined : Array.isArray(body.stop) ? body.stop : [body.stop];
  const format = body.response_format;
  const config: Record<string, unknown> = {
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k,
    maxOutputTokens: body.max_completion_tokens ?? body.max_tokens,
    stopSequences: stop,
    seed: body.seed,
    presencePenalty: body.presence_penalty,
    frequencyPenalty: body.frequency_penalty,
    candidateCount: body.n,
    ...(format?.type === 'json_object' && { responseMimeType: 'application/json' }),
    ...(format?.type === 'json_schema' && { responseMimeType: 'application/json', responseJsonSchema: format.json_schema?.schema }),
  };
  return Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined));
}

/** Gemini answers at most 8 candidates a request. */
export const GEMINI_MAX_CANDIDATES = 8;

/** Spec 4.1 parameters `generateContent` has no equivalent for. */
function geminiRefusal(body: ChatBody): ParamRefusal | null {
  if (body.n !== undefined && body.n > GEMINI_MAX_CANDIDATES) return { param: 'n', message: `\`n\` above ${GEMINI_MAX_CANDIDATES} is not supported by Gemini models (candidateCount is 1 to ${GEMINI_MAX_CANDIDATES}).` };
  if (body.parallel_tool_calls === false && (body.tools?.length ?? 0) > 0 && body.tool_choice !== 'none') {
    return { param: 'parallel_tool_calls', message: '`parallel_tool_calls` false is not supported by Gemini models: they have no switch to keep function calls to one a turn.' };
  }
  if (body.user !== undefined) return { param: 'user', message: '`user` is not supported by Gemini models: generateContent has no end-user field to forward it in (use `metadata.user_id` to attribute the request).' };
  return null;
}

function toolConfig(choice: ChatBody['tool_choice']): Record<string, unknown> | undefined {
  if (choice === undefined || choice === 'auto') return undefined;
  if (choice === 'none') return { functionCallingConfig: { mode: 'NONE' } };
  if (choice === 'required') return { functionCallingConfig: { mode: 'ANY' } };
  return { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: [choice.function.name] } };
}

export function mapGeminiUsage(u: GeminiUsage | undefined): Usage | null {
  if (!u) return null;
  const prompt = u.promptTokenCount ?? 0;
  const thoughts = u.thoughtsTokenCount ?? 0;
  const completion = (u.candidatesTokenCount ?? 0) + thoughts;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: u.totalTokenCount ?? prompt + completion,
    ...(u.cachedContentTokenCount !== undefined && { prompt_tokens_details: { cached_tokens: u.cachedContentTokenCount } }),
    ...(thoughts > 0 && { completion_tokens_details: { reasoning_tokens: thoughts } }),
  };
}

const FINISH: Record<string, FinishReason> = { STOP: 'stop', MAX_TOKENS: 'length', SAFETY: 'content_filter', RECITATION: 'content_filter', BLOCKLIST: 'content_filter', PROHIBITED_CONTENT: 'content_filter', SPII: 'content_filter' };

function callsOf(parts: Part[], offset: number): ToolCall[] {
  return parts.filter((p) => p.functionCall).map((p, i) => ({ id: `call_${offset + i}_${p.functionCall!.name}`, type: 'function', function: { name: p.functionCall!.name, arguments: JSON.stringify(p.functionCall!.args ?? {}) } }));
}

const visibleText = (parts: Part[]) => parts.filter((p) => typeof p.text === 'string' && !p.thought).map((p) => p.text).join('');

/** The request body: what is forwarded as it is (a new object, extended in place), the contents, and what Gemini names its own way. */
function geminiBody(forwarded: Record<string, unknown>, body: ChatBody, config: Record<string, unknown>): Record<string, unknown> {
  const sent = Object.assign(forwarded, toGeminiContents(body.messages));
  if (Object.keys(config).length > 0) sent.generationConfig = config;
  if (body.tools) {
    sent.tools = [{ functionDeclarations: body.tools.map((t) => ({ name: t.function.name, ...(t.function.description && { description: t.function.description }), ...(t.function.parameters && { parameters: t.function.parameters }) })) }];
  }
  const choice = toolConfig(body.tool_choice);
  if (choice) sent.toolConfig = choice;
  return sent;
}

/** Gemini `generateContent` / `streamGenerateContent?alt=sse`. */
export const googleAdapter: ProviderAdapter = {
  unsupportedSampling: ['logprobs', 'top_logprobs', 'logit_bias'],

  refusal: geminiRefusal,

  buildRequest(body, { model, stream }) {
    const forwarded = Object.fromEntries(Object.entries(body).filter(([k]) => !NOT_FORWARDED.includes(k)));
    const config = generationConfig(body);
    return {
      path: `/models/${encodeURIComponent(model)}:${stream ? 'streamGenerateContent' : 'generateContent'}`,
      query: stream ? { alt: 'sse' } : undefined,
      body: geminiBody(forwarded, body, config),
    };
  },

  parseResponse(json): ChatResult {
    const r = json as GeminiResponse;
    const candidates = r.candidates ?? [];
    return {
      model: r.modelVersion ?? null,
      choices: candidates.map((c, i) => {
        const parts = c.content?.parts ?? [];
        const calls = callsOf(parts, 0);
        const text = visibleText(parts);
        return {
          index: c.index ?? i,
          message: { role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length && { tool_calls: calls }) },
          finish_reason: calls.length ? 'tool_calls' : FINISH[c.finishReason ?? 'STOP'] ?? 'stop',
        };
      }),
      usage: mapGeminiUsage(r.usageMetadata),
    };
  },

  createStreamDecoder() {
    // Tool calls are numbered per candidate (each is one choice, `n` > 1).
    const callCounts = new Map<number, number>();
    return ({ data }): StreamOutput[] => {
      const r = JSON.parse(data) as GeminiResponse & { error?: unknown };
      if (r.error) return [{ type: 'error', failure: classifyByStatus(500, r, {}) }];
      const out: StreamOutput[] = [];
      if (r.modelVersion) out.push({ type: 'model', model: r.modelVersion });
      for (const c of r.candidates ?? []) {
        const parts = c.content?.parts ?? [];
        const text = visibleText(parts);
        const index = c.index ?? 0;
        const calls = callCounts.get(index) ?? 0;
        const toolCalls = callsOf(parts, calls).map((call, i) => Object.assign({}, call, { index: calls + i }));
        callCounts.set(index, calls + toolCalls.length);
        if (text || toolCalls.length) {
          out.push({ type: 'delta', choices: [{ index, delta: Object.assign({}, text ? { content: text } : undefined, toolCalls.length ? { tool_calls: toolCalls } : undefined), finish_reason: null }] });
        }
        if (c.finishReason) out.push({ type: 'delta', choices: [{ index, delta: {}, finish_reason: (callCounts.get(index) ?? 0) > 0 ? 'tool_calls' : FINISH[c.finishReason] ?? 'stop' }] });
      }
      const usage = mapGeminiUsage(r.usageMetadata);
      if (usage) out.push({ type: 'usage', usage });
      return out;
    };
  },

  classifyError(status, body, headers) {
    // Gemini answers a bad API key with 400 INVALID_ARGUMENT.
    if (status === 400 && /api key/i.test(providerMessage(body, ''))) return { kind: 'credential', message: providerMessage(body, 'API key not valid'), status };
    return classifyByStatus(status, body, headers);
  },
};
