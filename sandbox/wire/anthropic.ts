import { pieces, type ToolSpec } from '../turn';
import { textOf, type AnswerContext, type Frame, type ParsedChat, type Wire } from './types';

type Block = { type: string; text?: string; content?: unknown };
type Message = { role: string; content: string | Block[] };

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error',
  413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error', 529: 'overloaded_error',
};

function usage(ctx: AnswerContext) {
  const cached = ctx.directives.cached ?? 0;
  return {
    // Anthropic counts cached prompt tokens apart from input_tokens.
    input_tokens: ctx.turn.promptTokens - cached,
    output_tokens: ctx.turn.completionTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  };
}

const stopReason = (ctx: AnswerContext) => (ctx.turn.kind === 'tool' ? 'tool_use' : ctx.turn.truncated ? 'max_tokens' : 'end_turn');
const toolUseId = (ctx: AnswerContext) => `toolu_${ctx.id.slice(-16)}`;

/** Anthropic Messages API (`POST /v1/messages`), plain and streamed. */
export const anthropicWire: Wire = {
  credential: (req) => req.headers['x-api-key'] as string | undefined,
  unauthorized: () => [401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }],
  error: (status, message) => ({ type: 'error', error: { type: ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message } }),
  models: (ids) => ({ data: ids.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })), has_more: false, first_id: ids[0], last_id: ids.at(-1) }),

  parseChat(body): ParsedChat | { invalid: string } {
    if (typeof body.max_tokens !== 'number') return { invalid: 'max_tokens: Field required' };
    const messages = (body.messages as Message[] | undefined) ?? [];
    if (messages.length === 0) return { invalid: 'messages: at least one message is required' };
    if (messages.some((m) => m.role !== 'user' && m.role !== 'assistant')) return { invalid: 'messages: roles must be user or assistant' };
    const last = messages.at(-1)!;
    const blocks = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content;
    const toolResult = blocks.find((b) => b.type === 'tool_result');
    const tools = ((body.tools as Array<{ name: string; input_schema?: ToolSpec['parameters'] }> | undefined) ?? []).map((t) => ({ name: t.name, parameters: t.input_schema }));
    const choice = body.tool_choice as { type: string; name?: string } | undefined;
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
    };
  },

  answer(ctx) {
    const content = ctx.turn.kind === 'tool'
      ? [{ type: 'tool_use', id: toolUseId(ctx), name: ctx.turn.name, input: ctx.turn.arguments }]
      : [{ type: 'text', text: ctx.turn.text }];
    return { id: `msg_${ctx.id}`, type: 'message', role: 'assistant', model: ctx.model, content, stop_reason: stopReason(ctx), stop_sequence: null, usage: usage(ctx) };
  },

  stream(ctx): Frame[] {
    const ev = (event: string, data: object, content = false): Frame => ({ event, data: JSON.stringify({ type: event, ...data }), content });
    const u = usage(ctx);
    const frames: Frame[] = [
      ev('message_start', { message: { id: `msg_${ctx.id}`, type: 'message', role: 'assistant', model: ctx.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...u, output_tokens: 1 } } }),
    ];
    if (ctx.turn.kind === 'tool') {
      const args = JSON.stringify(ctx.turn.arguments);
      const half = Math.ceil(args.length / 2);
      frames.push(ev('content_block_start', { index: 0, content_block: { type: 'tool_use', id: toolUseId(ctx), name: ctx.turn.name, input: {} } }));
      frames.push(ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: args.slice(0, half) } }, true));
      frames.push(ev('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: args.slice(half) } }, true));
    } else {
      frames.push(ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }));
      frames.push({ event: 'ping', data: JSON.stringify({ type: 'ping' }) });
      for (const piece of pieces(ctx.turn.text)) frames.push(ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } }, true));
    }
    frames.push(ev('content_block_stop', { index: 0 }));
    frames.push(ev('message_delta', { delta: { stop_reason: stopReason(ctx), stop_sequence: null }, usage: { output_tokens: u.output_tokens } }));
    frames.push(ev('message_stop', {}));
    return frames;
  },
};
