import { countWords, pieces, type ToolSpec } from '../turn';
import { isObject, textOf, type AnswerContext, type Frame, type ParsedChat, type Wire } from './types';

type Block = { type: string; text?: string; content?: unknown };
type Message = { role: string; content: string | Block[] };

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error',
  413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error', 529: 'overloaded_error',
};

/**
 * Tokens of thinking: the thinking text's words, and `reasoning=<n>` more (what a model thinks
 * beyond what it shows), billed as output whether shown, summarized or omitted.
 */
const thinkingTokens = (ctx: AnswerContext) => (ctx.thinking ? countWords(THINKING) + (ctx.directives.reasoning ?? 0) : 0);

function usage(ctx: AnswerContext) {
  const cached = ctx.directives.cached ?? 0;
  const minutes = ctx.directives.cacheWrite ?? 0;
  const hour = ctx.directives.cacheWrite1h ?? 0;
  return {
    // Anthropic counts cached prompt tokens, and those written to the cache, apart from input_tokens.
    input_tokens: ctx.turn.promptTokens - cached - minutes - hour,
    // Thinking is output (Anthropic's output_tokens includes it).
    output_tokens: ctx.turn.completionTokens + thinkingTokens(ctx),
    cache_creation_input_tokens: minutes + hour,
    cache_read_input_tokens: cached,
    cache_creation: { ephemeral_5m_input_tokens: minutes, ephemeral_1h_input_tokens: hour },
    ...(ctx.directives.webSearches !== undefined && { server_tool_use: { web_search_requests: ctx.directives.webSearches } }),
  };
}

/** Top-level fields the Messages API takes; any other is refused ("Extra inputs are not permitted"). */
const FIELDS = new Set(['model', 'messages', 'max_tokens', 'system', 'stop_sequences', 'stream', 'temperature', 'top_p', 'top_k', 'tools', 'tool_choice', 'metadata',
  'output_config', 'thinking', 'service_tier', 'container', 'mcp_servers', 'cache_control', 'inference_geo', 'speed', 'diagnostics']);

/** Fields only a beta turns on: without it in `anthropic-beta`, refused like an unknown field. */
const BETA_FIELDS: Record<string, string> = { context_management: 'context-management-2025-06-27' };

const EFFORTS = ['low', 'medium', 'high', 'xhigh', 'max'];
const THINKING_TYPES = ['enabled', 'disabled', 'adaptive', 'between_tools'];
const CONTEXT_EDITS = ['clear_tool_uses_20250919', 'clear_thinking_20251015', 'compact_20260112'];

/** `thinking`, as the API checks it: a known type, a budget of at least 1,024 below `max_tokens`, a known display. */
function invalidThinking(thinking: unknown, maxTokens: number): string | null {
  if (!isObject(thinking) || !THINKING_TYPES.includes(String(thinking.type))) {
    return `thinking: Input tag '${isObject(thinking) ? String(thinking.type) : ''}' found using 'type' does not match any of the expected tags: ${THINKING_TYPES.map((t) => `'${t}'`).join(', ')}`;
  }
  if (thinking.type === 'enabled') {
    const budget = thinking.budget_tokens;
    if (typeof budget !== 'number' || !Number.isInteger(budget)) return 'thinking.enabled.budget_tokens: Field required';
    if (budget < 1024) return 'thinking.enabled.budget_tokens: Input should be greater than or equal to 1024';
    if (budget >= maxTokens) return '`max_tokens` must be greater than `thinking.budget_tokens`';
  }
  if (thinking.display != null && !['summarized', 'omitted'].includes(String(thinking.display))) return `thinking.${String(thinking.type)}.display: Input should be 'summarized' or 'omitted'`;
  return null;
}

/** `output_config`: an effort level and a JSON-schema format, nothing else. */
function invalidOutputConfig(config: unknown): string | null {
  if (!isObject(config)) return 'output_config: Input should be a valid dictionary';
  const extra = Object.keys(config).find((k) => k !== 'effort' && k !== 'format');
  if (extra) return `output_config.${extra}: Extra inputs are not permitted`;
  if (config.effort != null && !EFFORTS.includes(String(config.effort))) return `output_config.effort: Input should be ${EFFORTS.map((e) => `'${e}'`).join(', ')}`;
  const format = config.format;
  if (format != null && !(isObject(format) && format.type === 'json_schema' && isObject(format.schema))) return "output_config.format: Input tag does not match the expected tag: 'json_schema' with a 'schema' object";
  return null;
}

/** `context_management`: a list of known edits. */
function invalidContextManagement(config: unknown): string | null {
  if (!isObject(config)) return 'context_management: Input should be a valid dictionary';
  if (config.edits === undefined) return null;
  if (!Array.isArray(config.edits)) return 'context_management.edits: Input should be a valid list';
  const i = config.edits.findIndex((e) => !isObject(e) || !CONTEXT_EDITS.includes(String(e.type)));
  return i < 0 ? null : `context_management.edits.${i}: Input tag does not match any of the expected tags: ${CONTEXT_EDITS.map((t) => `'${t}'`).join(', ')}`;
}

/**
 * The turns: `user` and `assistant`, and `system` messages (instructions between turns) that
 * hold only text.
 */
function invalidMessages(messages: unknown): string | null {
  if (!Array.isArray(messages) || messages.length === 0) return 'messages: at least one message is required';
  for (const [i, m] of (messages as unknown[]).entries()) {
    if (!isObject(m) || !['user', 'assistant', 'system'].includes(String(m.role))) return `messages.${i}.role: Input should be 'user', 'assistant' or 'system'`;
    if (m.role !== 'system' || typeof m.content === 'string') continue;
    if (!Array.isArray(m.content)) return `messages.${i}.content: Input should be a valid string or list`;
    const j = m.content.findIndex((b) => !isObject(b) || b.type !== 'text');
    if (j >= 0) return `messages.${i}.content.${j}: Input tag does not match the expected tag: 'text'`;
  }
  return null;
}

/** What the real API refuses among the fields the gateway translates to and passes along. */
function invalidFields(body: Record<string, unknown>, betas: readonly string[]): string | null {
  const extra = Object.keys(body).find((k) => !FIELDS.has(k) && !(BETA_FIELDS[k] && betas.includes(BETA_FIELDS[k])));
  if (extra) return `${extra}: Extra inputs are not permitted`;
  const messages = invalidMessages(body.messages);
  if (messages) return messages;
  if (body.thinking !== undefined) {
    const thinking = invalidThinking(body.thinking, body.max_tokens as number);
    if (thinking) return thinking;
  }
  if (body.output_config !== undefined) {
    const config = invalidOutputConfig(body.output_config);
    if (config) return config;
  }
  if (body.context_management != null) {
    const context = invalidContextManagement(body.context_management);
    if (context) return context;
  }
  const t = body.temperature;
  if (t !== undefined && (typeof t !== 'number' || t < 0 || t > 1)) return 'temperature: Input should be less than or equal to 1';
  if (body.stop_sequences !== undefined && !(Array.isArray(body.stop_sequences) && body.stop_sequences.every((x) => typeof x === 'string'))) return 'stop_sequences: Input should be a valid list of strings';
  if (body.metadata !== undefined) {
    if (!isObject(body.metadata) || Object.keys(body.metadata).some((k) => k !== 'user_id')) return 'metadata: Extra inputs are not permitted';
    if (typeof body.metadata.user_id !== 'string' || body.metadata.user_id.length > 256) return 'metadata.user_id: Input should be a valid string of at most 256 characters';
  }
  const choice = body.tool_choice;
  if (choice !== undefined) {
    if (!isObject(choice) || !['auto', 'any', 'tool', 'none'].includes(String(choice.type))) return "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'";
    if (choice.type === 'tool' && typeof choice.name !== 'string') return 'tool_choice.tool.name: Field required';
    const allowed = choice.type === 'none' ? ['type'] : choice.type === 'tool' ? ['type', 'name', 'disable_parallel_tool_use'] : ['type', 'disable_parallel_tool_use'];
    const extraKey = Object.keys(choice).find((k) => !allowed.includes(k));
    if (extraKey) return `tool_choice.${choice.type}.${extraKey}: Extra inputs are not permitted`;
    if (choice.disable_parallel_tool_use !== undefined && typeof choice.disable_parallel_tool_use !== 'boolean') return `tool_choice.${choice.type}.disable_parallel_tool_use: Input should be a valid boolean`;
  }
  return null;
}

/** What the sandbox model "thinks", and the signature Anthropic puts on a thinking block (checked when it comes back). */
const THINKING = 'The user wants an answer; the sandbox gives its usual one.';
const signatureOf = (ctx: AnswerContext) => `sandbox-signature-${ctx.id.slice(-12)}`;
/** The thinking text shown: none when the request asked for it omitted. */
const thinkingText = (ctx: AnswerContext) => (ctx.extra as { thinkingText?: string } | undefined)?.thinkingText ?? THINKING;

const stopReason = (ctx: AnswerContext) => (ctx.turn.kind === 'tool' ? 'tool_use' : ctx.turn.truncated ? 'max_tokens' : 'end_turn');
const toolUseId = (ctx: AnswerContext, i: number) => `toolu_${ctx.id.slice(-16)}${i > 0 ? `_${i}` : ''}`;

/** Anthropic Messages API (`POST /v1/messages`), plain and streamed. */
export const anthropicWire: Wire = {
  credential: (req) => req.headers['x-api-key'] as string | undefined,
  unauthorized: () => [401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }],
  error: (status, message) => ({ type: 'error', error: { type: ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message } }),
  models: (ids) => ({ data: ids.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })), has_more: false, first_id: ids[0], last_id: ids.at(-1) }),

  parseChat(body, route): ParsedChat | { invalid: string } {
    if (typeof body.max_tokens !== 'number') return { invalid: 'max_tokens: Field required' };
    const invalid = invalidFields(body, route.betas ?? []);
    if (invalid) return { invalid };
    const messages = body.messages as Message[];
    // The turn answered is the last user or assistant one: a system message may follow it.
    const last = messages.findLast((m) => m.role !== 'system') ?? messages.at(-1)!;
    const blocks = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content;
    const toolResult = blocks.find((b) => b.type === 'tool_result');
    const tools = ((body.tools as Array<{ name: string; input_schema?: ToolSpec['parameters'] }> | undefined) ?? []).map((t) => ({ name: t.name, parameters: t.input_schema }));
    const choice = body.tool_choice as { type: string; name?: string; disable_parallel_tool_use?: boolean } | undefined;
    const format = (body.output_config as { format?: { schema?: Record<string, unknown> } } | undefined)?.format;
    const system = typeof body.system === 'string' ? body.system : textOf(body.system);
    return {
      model: String(body.model ?? ''),
      stream: body.stream === true,
      includeUsage: true,
      promptText: [system, ...messages.map((m) => (typeof m.content === 'string' ? m.content : textOf(m.content)))].join(' '),
      tools,
      toolChoice: choice?.type === 'tool' ? choice.name : choice?.type === 'none' ? 'none' : undefined,
      lastRole: toolResult ? 'tool' : 'user',
      lastToolResult: toolResult ? textOf(toolResult.content) : undefined,
      maxTokens: body.max_tokens,
      params: Object.keys(body),
      parallelToolCalls: choice?.disable_parallel_tool_use === true ? false : undefined,
      ...(format && { json: { schema: format.schema } }),
      // Adaptive thinking thinks here every time; `display: omitted` keeps the signature, not the text.
      ...(isObject(body.thinking) && (body.thinking.type === 'enabled' || body.thinking.type === 'adaptive') && { thinking: true, extra: { thinkingText: body.thinking.display === 'omitted' ? '' : THINKING } }),
    };
  },

  answer(ctx) {
    const content: object[] = ctx.turn.kind === 'tool'
      ? ctx.turn.calls.map((c, i) => ({ type: 'tool_use', id: toolUseId(ctx, i), name: c.name, input: c.arguments }))
      : [{ type: 'text', text: ctx.turn.text }];
    if (ctx.thinking) content.unshift({ type: 'thinking', thinking: thinkingText(ctx), signature: signatureOf(ctx) });
    return { id: `msg_${ctx.id}`, type: 'message', role: 'assistant', model: ctx.model, content, stop_reason: stopReason(ctx), stop_sequence: null, usage: usage(ctx) };
  },

  stream(ctx): Frame[] {
    const ev = (event: string, data: object, content = false): Frame => ({ event, data: JSON.stringify({ type: event, ...data }), content });
    const u = usage(ctx);
    const frames: Frame[] = [
      ev('message_start', { message: { id: `msg_${ctx.id}`, type: 'message', role: 'assistant', model: ctx.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...u, output_tokens: 1 } } }),
    ];
    // A thinking block first, when asked for: its text, then its signature.
    const first = ctx.thinking ? 1 : 0;
    if (ctx.thinking) {
      frames.push(ev('content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }));
      if (thinkingText(ctx)) frames.push(ev('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: thinkingText(ctx) } }));
      frames.push(ev('content_block_delta', { index: 0, delta: { type: 'signature_delta', signature: signatureOf(ctx) } }));
      frames.push(ev('content_block_stop', { index: 0 }));
    }
    if (ctx.turn.kind === 'tool') {
      ctx.turn.calls.forEach((call, i) => {
        const index = first + i;
        const args = JSON.stringify(call.arguments);
        const half = Math.ceil(args.length / 2);
        frames.push(ev('content_block_start', { index, content_block: { type: 'tool_use', id: toolUseId(ctx, i), name: call.name, input: {} } }));
        frames.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(0, half) } }, true));
        frames.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(half) } }, true));
        frames.push(ev('content_block_stop', { index }));
      });
    } else {
      frames.push(ev('content_block_start', { index: first, content_block: { type: 'text', text: '' } }));
      frames.push({ event: 'ping', data: JSON.stringify({ type: 'ping' }) });
      for (const piece of pieces(ctx.turn.text)) frames.push(ev('content_block_delta', { index: first, delta: { type: 'text_delta', text: piece } }, true));
      frames.push(ev('content_block_stop', { index: first }));
    }
    frames.push(ev('message_delta', { delta: { stop_reason: stopReason(ctx), stop_sequence: null }, usage: { output_tokens: u.output_tokens } }));
    frames.push(ev('message_stop', {}));
    return frames;
  },

  billed(ctx) {
    const u = usage(ctx);
    return {
      input_tokens: ctx.turn.promptTokens, cache_read_tokens: u.cache_read_input_tokens,
      cache_write_tokens: u.cache_creation_input_tokens, cache_write_1h_tokens: u.cache_creation.ephemeral_1h_input_tokens,
      output_tokens: u.output_tokens, reasoning_tokens: thinkingTokens(ctx), web_searches: ctx.directives.webSearches ?? 0,
    };
  },
};
