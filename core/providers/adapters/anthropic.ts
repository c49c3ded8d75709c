import { safeJson, textOf } from './message-text';
import { classifyByStatus } from '../errors';
import { NATIVE_REQUEST, type ChatBody, type ChatMessage, type ChatResult, type ContentPart, type FinishReason, type NativeRequest, type ParamRefusal, type ProviderAdapter, type StreamOutput, type ToolCall, type Usage } from '../types';
import { DROPPABLE_PARAMS } from '../../chat/prepare';

type Block =
  | { type: 'text'; text: string }
  | { type: 'image'; source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string } }
  | { type: 'tool_use'; id: string; name: string; input: unknown }
  | { type: 'tool_result'; tool_use_id: string; content: string };
type AnthropicMessage = { role: 'user' | 'assistant'; content: Block[] };
type AnthropicUsage = {
  input_tokens?: number; output_tokens?: number; cache_read_input_tokens?: number; cache_creation_input_tokens?: number;
  /** The writes by how long they are kept (the total is `cache_creation_input_tokens`). */
  cache_creation?: { ephemeral_5m_input_tokens?: number; ephemeral_1h_input_tokens?: number } | null;
};

/**
 * OpenAI fields the Messages API does not take under their own name: translated below
 * (`stop`, `tools`, `tool_choice` with `parallel_tool_calls`, `user`, `response_format`),
 * refused up front (`n` > 1, see `refusal`), handled by the gateway (`stream_options`), or
 * sampling parameters without an equivalent, dropped and named (`unsupportedSampling`).
 */
const NOT_FORWARDED = ['messages', 'model', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'stop', 'tools', 'tool_choice', 'user', 'n', 'parallel_tool_calls', 'response_format',
  'frequency_penalty', 'presence_penalty', 'seed', 'logprobs', 'top_logprobs', 'logit_bias'];


function partToBlock(part: ContentPart): Block {
  if (part.type === 'image_url' && part.image_url) {
    const data = /^data:([^;]+);base64,(.*)$/.exec(part.image_url.url);
    return data ? { type: 'image', source: { type: 'base64', media_type: data[1]!, data: data[2]! } } : { type: 'image', source: { type: 'url', url: part.image_url.url } };
  }
  return { type: 'text', text: part.text ?? '' };
}


/** OpenAI messages to Anthropic's: system apart, tool results as user blocks, alternating turns merged. */
export function toAnthropicMessages(messages: ChatMessage[]): { system?: string; messages: AnthropicMessage[] } {
  const system = messages.filter((m) => m.role === 'system' || m.role === 'developer').map((m) => textOf(m.content)).join('\n\n');
  const out: AnthropicMessage[] = [];
  const push = (role: AnthropicMessage['role'], blocks: Block[]) => {
    const last = out.at(-1);
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === 'system' || m.role === 'developer') continue;
    if (m.role === 'tool') {
      push('user', [{ type: 'tool_result', tool_use_id: m.tool_call_id ?? '', content: textOf(m.content) }]);
    } else if (m.role === 'assistant') {
      const blocks: Block[] = [];
      const text = textOf(m.content);
      if (text) blocks.push({ type: 'text', text });
      for (const call of m.tool_calls ?? []) blocks.push({ type: 'tool_use', id: call.id, name: call.function.name, input: safeJson(call.function.arguments) });
      push('assistant', blocks.length ? blocks : [{ type: 'text', text: '' }]);
    } else {
      push('user', typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (m.content ?? []).map(partToBlock));
    }
  }
  return system ? { system, messages: out } : { messages: out };
}

/**
 * `tool_choice` and `parallel_tool_calls` together: Anthropic puts the parallel switch on the
 * choice (`disable_parallel_tool_use`), so `parallel_tool_calls: false` with tools offered
 * becomes `{type: 'auto', disable_parallel_tool_use: true}` when no choice was named. With
 * `none` (or no tools) no tool is called, so there is nothing to disable.
 */
function toolChoice(body: ChatBody): Record<string, unknown> | undefined {
  const choice = body.tool_choice;
  const serial = body.parallel_tool_calls === false && (body.tools?.length ?? 0) > 0 && choice !== 'none';
  const base = choice === undefined ? (serial ? { type: 'auto' } : undefined)
    : choice === 'auto' ? { type: 'auto' }
    : choice === 'required' ? { type: 'any' }
    : choice === 'none' ? { type: 'none' }
    : { type: 'tool', name: choice.function.name };
  return base && serial ? Object.assign({}, base, { disable_parallel_tool_use: true }) : base;
}

/** `response_format` json_schema as Anthropic's structured output (`output_config.format`). */
function outputConfig(body: ChatBody): Record<string, unknown> | undefined {
  const format = body.response_format;
  if (format?.type !== 'json_schema' || !format.json_schema?.schema) return undefined;
  return { format: { type: 'json_schema', schema: format.json_schema.schema } };
}

/** Spec 4.1 parameters the Messages API has no equivalent for. */
function anthropicRefusal(body: ChatBody): ParamRefusal | null {
  if (body.n !== undefined && body.n > 1) return { param: 'n', message: '`n` greater than 1 is not supported by Anthropic models: the Messages API returns one answer per request.' };
  if (body.temperature !== undefined && body.temperature > 1) return { param: 'temperature', message: '`temperature` above 1 is not supported by Anthropic models (their range is 0 to 1).' };
  const format = body.response_format;
  if (format && format.type !== 'text' && !(format.type === 'json_schema' && format.json_schema?.schema)) {
    return { param: 'response_format', message: `\`response_format\` of type \`${format.type}\` without a schema is not supported by Anthropic models: they take structured output only as a JSON schema (\`{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}\`).` };
  }
  return null;
}

export function mapAnthropicUsage(u: AnthropicUsage | undefined): Usage | null {
  if (!u) return null;
  const cached = u.cache_read_input_tokens ?? 0;
  // Cache writes are billed above the input rate (1.25x for 5 minutes, 2x for an hour): kept apart for pricing.
  const hour = u.cache_creation?.ephemeral_1h_input_tokens ?? 0;
  const writes = Math.max(u.cache_creation_input_tokens ?? 0, (u.cache_creation?.ephemeral_5m_input_tokens ?? 0) + hour);
  const prompt = (u.input_tokens ?? 0) + cached + writes;
  const completion = u.output_tokens ?? 0;
  return {
    prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion,
    ...(cached > 0 && { prompt_tokens_details: { cached_tokens: cached } }),
    ...(writes > 0 && { cache_write_tokens: { total: writes, ttl_1h: Math.min(hour, writes) } }),
  };
}

const STOP_REASONS: Record<string, FinishReason> = { end_turn: 'stop', stop_sequence: 'stop', max_tokens: 'length', tool_use: 'tool_calls', refusal: 'content_filter', pause_turn: 'stop' };

/** Anthropic Messages API (`/messages`): system prompt apart, `max_tokens` required, tool blocks. */
export const anthropicAdapter: ProviderAdapter = {
  nativeWire: 'anthropic-messages',

  unsupportedSampling: ['frequency_penalty', 'presence_penalty', 'seed', 'logprobs', 'top_logprobs', 'logit_bias'],

  refusal: anthropicRefusal,

  nativeLeftOut: fieldsWithoutTheirBeta,

  buildRequest(body, { model, stream, defaultMaxTokens, config }) {
    const native = body[NATIVE_REQUEST];
    if (native?.wire === 'anthropic-messages') {
      const betas = allowedBetas(native.betas, config);
      const sent = nativeMessages(native.body, body, model, stream, defaultMaxTokens);
      for (const field of fieldsWithoutTheirBeta(native, config)) delete sent[field];
      return { path: '/messages', body: sent, ...(betas.length > 0 && { headers: { 'anthropic-beta': betas.join(',') } }) };
    }
    const forwarded = Object.fromEntries(Object.entries(body).filter(([k]) => !NOT_FORWARDED.includes(k)));
    const { system, messages } = toAnthropicMessages(body.messages);
    const stop = body.stop === undefined ? undefined : Array.isArray(body.stop) ? body.stop : [body.stop];
    const choice = toolChoice(body);
    const output = outputConfig(body);
    return {
      path: '/messages',
      // `forwarded` is a new object, extended in place.
      body: Object.assign(forwarded, {
        model,
        ...(system && { system }),
        messages,
        max_tokens: body.max_completion_tokens ?? body.max_tokens ?? defaultMaxTokens,
        ...(stop && { stop_sequences: stop }),
        ...(body.tools && { tools: body.tools.map((t) => ({ name: t.function.name, ...(t.function.description && { description: t.function.description }), input_schema: t.function.parameters ?? { type: 'object', properties: {} }, ...(t.function.strict === true && { strict: true }) })) }),
        ...(choice && { tool_choice: choice }),
        ...(body.user !== undefined && { metadata: { user_id: body.user } }),
        ...(output && { output_config: output }),
        ...(stream && { stream: true }),
      }),
    };
  },

  parseResponse(json): ChatResult {
    const r = json as { model?: string; content?: Block[]; stop_reason?: string; usage?: AnthropicUsage };
    const blocks = r.content ?? [];
    const text = blocks.filter((b): b is Extract<Block, { type: 'text' }> => b.type === 'text').map((b) => b.text).join('');
    const calls: ToolCall[] = blocks
      .filter((b): b is Extract<Block, { type: 'tool_use' }> => b.type === 'tool_use')
      .map((b) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }));
    return {
      native: json as Record<string, unknown>,
      model: r.model ?? null,
      choices: [{
        index: 0,
        message: { role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length && { tool_calls: calls }) },
        finish_reason: STOP_REASONS[r.stop_reason ?? 'end_turn'] ?? 'stop',
      }],
      usage: mapAnthropicUsage(r.usage),
    };
  },

  createStreamDecoder(options) {
    const translate = decodeAnthropicEvent();
    if (!options?.native) return translate;
    // Each event passed along first, then its translation (which the tally, guardrails and cache read).
    return (e): StreamOutput[] => [{ type: 'native', event: e.event ?? '', data: e.data }, ...translate(e)];
  },

  classifyError: (status, body, headers) => classifyByStatus(status, body, headers),
};

/**
 * The client's beta features this connection allows (its `config.anthropic_betas`), sent as the
 * `anthropic-beta` header; none unless the connection's owner listed them, since a beta can
 * change what a request costs or where its data goes.
 */
function allowedBetas(betas: string[] | undefined, config: Record<string, unknown>): string[] {
  if (!betas?.length) return [];
  const allowed = Array.isArray(config.anthropic_betas) ? (config.anthropic_betas as unknown[]) : [];
  return betas.filter((b) => allowed.includes(b));
}

/**
 * Request fields only a beta turns on: without it in `anthropic-beta` Anthropic refuses the whole
 * request (`context_management: Extra inputs are not permitted`). Coding agents send them with
 * their betas on every request, so where the beta is not sent the field is left out (and named)
 * rather than the request failing.
 */
const BETA_FIELDS: ReadonlyArray<readonly [field: string, beta: string]> = [['context_management', 'context-management-2025-06-27']];

const NONE: readonly string[] = Object.freeze([]);

/** The fields of a native request whose beta this connection is not sent (`nativeLeftOut`); nothing is made for a request without them. */
function fieldsWithoutTheirBeta(native: NativeRequest, config: Record<string, unknown>): readonly string[] {
  let left: string[] | undefined;
  for (const [field, beta] of BETA_FIELDS) {
    if (native.body[field] !== undefined && !allowedBetas(native.betas, config).includes(beta)) (left ??= []).push(field);
  }
  return left ?? NONE;
}

/**
 * A native Messages request (a client that spoke Anthropic's wire) as sent: the client's own
 * body with the candidate's model, the output cap the chat body carries (the one the budget
 * held) and without the sampling parameters the chat body no longer has (dropped for this model).
 */
function nativeMessages(request: Record<string, unknown>, body: ChatBody, model: string, stream: boolean, defaultMaxTokens: number): Record<string, unknown> {
  const sent: Record<string, unknown> = Object.assign({}, request, { model, max_tokens: body.max_completion_tokens ?? body.max_tokens ?? defaultMaxTokens });
  for (const k of DROPPABLE_PARAMS) if (sent[k] !== undefined && body[k] === undefined) delete sent[k];
  if (stream) sent.stream = true;
  else delete sent.stream;
  return sent;
}

/** Anthropic's stream events in the chat vocabulary (deltas, usage, the model, done or an error). */
function decodeAnthropicEvent() {
  let promptUsage: AnthropicUsage = {};
  const toolIndexOfBlock = new Map<number, number>();
  return ({ event, data }: { event?: string; data: string }): StreamOutput[] => {
    const e = JSON.parse(data) as { type?: string; index?: number; message?: { model?: string; usage?: AnthropicUsage }; content_block?: Block; delta?: { type?: string; text?: string; partial_json?: string; stop_reason?: string }; usage?: AnthropicUsage; error?: { type?: string; message?: string } };
    switch (e.type ?? event) {
      case 'message_start':
        promptUsage = e.message?.usage ?? {};
        return [...(e.message?.model ? [{ type: 'model' as const, model: e.message.model }] : []), { type: 'delta', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }];
      case 'content_block_start':
        if (e.content_block?.type === 'tool_use') {
          const toolIndex = toolIndexOfBlock.size;
          toolIndexOfBlock.set(e.index ?? 0, toolIndex);
          return [{ type: 'delta', choices: [{ index: 0, delta: { tool_calls: [{ index: toolIndex, id: e.content_block.id, type: 'function', function: { name: e.content_block.name, arguments: '' } }] }, finish_reason: null }] }];
        }
        return [];
      case 'content_block_delta':
        if (e.delta?.type === 'text_delta') return [{ type: 'delta', choices: [{ index: 0, delta: { content: e.delta.text ?? '' }, finish_reason: null }] }];
        if (e.delta?.type === 'input_json_delta') {
          return [{ type: 'delta', choices: [{ index: 0, delta: { tool_calls: [{ index: toolIndexOfBlock.get(e.index ?? 0) ?? 0, function: { arguments: e.delta.partial_json ?? '' } }] }, finish_reason: null }] }];
        }
        return [];
      case 'message_delta': {
        const usage = mapAnthropicUsage(Object.assign({}, promptUsage, { output_tokens: e.usage?.output_tokens ?? promptUsage.output_tokens }));
        return [
          { type: 'delta', choices: [{ index: 0, delta: {}, finish_reason: STOP_REASONS[e.delta?.stop_reason ?? 'end_turn'] ?? 'stop' }] },
          ...(usage ? [{ type: 'usage' as const, usage }] : []),
        ];
      }
      case 'message_stop':
        return [{ type: 'done' }];
      case 'error': {
        const status = e.error?.type === 'overloaded_error' ? 529 : e.error?.type === 'rate_limit_error' ? 429 : 500;
        return [{ type: 'error', failure: classifyByStatus(status, e, {}) }];
      }
      default:
        return [];
    }
  };
}
