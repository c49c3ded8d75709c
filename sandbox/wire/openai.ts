import type { ToolSpec } from '../turn';
import { pieces } from '../turn';
import { textOf, type AnswerContext, type Frame, type ParsedChat, type Wire } from './types';

type Message = { role: string; content?: unknown; tool_call_id?: string };

function usage(ctx: AnswerContext) {
  const { promptTokens, completionTokens } = ctx.turn;
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    ...(ctx.directives.cached !== undefined && { prompt_tokens_details: { cached_tokens: ctx.directives.cached } }),
    ...(ctx.directives.reasoning !== undefined && { completion_tokens_details: { reasoning_tokens: ctx.directives.reasoning } }),
    ...(ctx.directives.reportCost !== undefined && { cost: ctx.directives.reportCost }),
  };
}

function finishReason(ctx: AnswerContext): string {
  return ctx.turn.kind === 'tool' ? 'tool_calls' : ctx.turn.truncated ? 'length' : 'stop';
}

const toolCallId = (ctx: AnswerContext) => `call_${ctx.id.slice(-12)}`;

/** OpenAI Chat Completions, also the wire of every OpenAI-compatible kind and of Azure. */
export const openaiWire: Wire = {
  credential(req) {
    const auth = req.headers.authorization;
    return (req.headers['api-key'] as string | undefined) ?? (auth?.startsWith('Bearer ') ? auth.slice(7) : undefined);
  },
  unauthorized: () => [401, { error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } }],
  error(status, message, extra) {
    const type = status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error';
    const code = extra?.moderation ? 'content_filter' : extra?.param ? 'unsupported_parameter' : status === 429 ? 'rate_limit_exceeded' : null;
    return { error: { message, type, param: extra?.param ?? null, code } };
  },
  models: (ids) => ({ object: 'list', data: ids.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'sandbox' })) }),

  parseChat(body, route): ParsedChat | { invalid: string } {
    const messages = (body.messages as Message[] | undefined) ?? [];
    if (!Array.isArray(messages) || messages.length === 0) return { invalid: "'messages' is a required property" };
    const last = messages.at(-1)!;
    const tools = ((body.tools as Array<{ function: ToolSpec }> | undefined) ?? []).map((t) => t.function);
    const choice = body.tool_choice as string | { function?: { name?: string } } | undefined;
    return {
      model: route.model ?? String(body.model ?? ''),
      stream: body.stream === true,
      includeUsage: (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true,
      promptText: messages.map((m) => textOf(m.content)).join(' '),
      tools,
      toolChoice: typeof choice === 'string' ? (choice === 'auto' || choice === 'required' ? undefined : choice) : choice?.function?.name,
      lastRole: last.role === 'tool' ? 'tool' : last.role === 'assistant' ? 'assistant' : 'user',
      lastToolResult: last.role === 'tool' ? textOf(last.content) : undefined,
      maxTokens: (body.max_completion_tokens ?? body.max_tokens) as number | undefined,
      params: Object.keys(body),
    };
  },

  answer(ctx) {
    const message = ctx.turn.kind === 'tool'
      ? { role: 'assistant', content: null, tool_calls: [{ id: toolCallId(ctx), type: 'function', function: { name: ctx.turn.name, arguments: JSON.stringify(ctx.turn.arguments) } }] }
      : { role: 'assistant', content: ctx.turn.text, refusal: null };
    return {
      id: `chatcmpl-${ctx.id}`,
      object: 'chat.completion',
      created: ctx.created,
      model: ctx.model,
      choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(ctx) }],
      usage: usage(ctx),
      system_fingerprint: 'fp_sandbox',
    };
  },

  stream(ctx): Frame[] {
    const chunk = (delta: object, finish: string | null = null, extra: object = {}) => JSON.stringify({
      id: `chatcmpl-${ctx.id}`, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...extra,
    });
    const frames: Frame[] = [{ data: chunk({ role: 'assistant', content: '' }) }];
    if (ctx.turn.kind === 'tool') {
      const args = JSON.stringify(ctx.turn.arguments);
      const half = Math.ceil(args.length / 2);
      frames.push({ content: true, data: chunk({ tool_calls: [{ index: 0, id: toolCallId(ctx), type: 'function', function: { name: ctx.turn.name, arguments: args.slice(0, half) } }] }) });
      frames.push({ content: true, data: chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(half) } }] }) });
    } else {
      for (const piece of pieces(ctx.turn.text)) frames.push({ content: true, data: chunk({ content: piece }) });
    }
    frames.push({ data: chunk({}, finishReason(ctx)) });
    if (ctx.includeUsage) frames.push({ data: JSON.stringify({ id: `chatcmpl-${ctx.id}`, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [], usage: usage(ctx) }) });
    frames.push({ data: '[DONE]' });
    return frames;
  },
};
