import type { ToolSpec } from '../turn';
import { pieces } from '../turn';
import { completionBilled, completionTokens, isObject, pricedTier, textOf, type AnswerContext, type Frame, type ParsedChat, type Wire } from './types';

type Message = { role: string; content?: unknown; tool_call_id?: string };

function usage(ctx: AnswerContext) {
  const { promptTokens } = ctx.turn;
  const completion = completionTokens(ctx);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completion,
    total_tokens: promptTokens + completion,
    ...(ctx.directives.cached !== undefined && { prompt_tokens_details: { cached_tokens: ctx.directives.cached } }),
    ...(ctx.directives.reasoning !== undefined && { completion_tokens_details: { reasoning_tokens: ctx.directives.reasoning } }),
    ...(ctx.directives.reportCost !== undefined && { cost: ctx.directives.reportCost }),
  };
}

function finishReason(ctx: AnswerContext): string {
  return ctx.turn.kind === 'tool' ? 'tool_calls' : ctx.turn.truncated ? 'length' : 'stop';
}

const toolCallId = (ctx: AnswerContext, i: number) => `call_${ctx.id.slice(-12)}${i > 0 ? `_${i}` : ''}`;

/** One token's log probability entry, with `top` alternatives (the sandbox's are made up but well-formed). */
function tokenLogprob(token: string, top: number) {
  const entry = (t: string, logprob: number) => ({ token: t, logprob, bytes: [...Buffer.from(t)] });
  return { ...entry(token, -0.01), top_logprobs: Array.from({ length: top }, (_, i) => entry(i === 0 ? token : `${token.trim()}${i}`, i === 0 ? -0.01 : -1 - i)) };
}

const REASONING_EFFORTS = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'];

/** The sandbox's models that reason (OpenAI's o-series and GPT-5, not its chat variants): the ones that take `reasoning_effort`. */
const reasons = (model: string) => /^(o\d|gpt-5)(?!.*-chat)/.test(model);

/**
 * `reasoning_effort`, as OpenAI checks it: a known level, and only for a model that reasons
 * (another refuses it as an unsupported parameter).
 */
function invalidReasoningEffort(body: Record<string, unknown>, model: string): { invalid: string; param?: string } | null {
  const effort = body.reasoning_effort;
  if (effort == null) return null;
  if (!REASONING_EFFORTS.includes(String(effort))) return { invalid: `Invalid value: '${String(effort)}'. Supported values are: ${REASONING_EFFORTS.map((e) => `'${e}'`).join(', ')}.`, param: 'reasoning_effort' };
  if (!reasons(model)) return { invalid: "Unsupported parameter: 'reasoning_effort' is not supported with this model.", param: 'reasoning_effort' };
  return null;
}

/**
 * What the real API refuses among the parameters the gateway translates: `n` out of 1..128,
 * `top_logprobs` without `logprobs`, `parallel_tool_calls` without tools, a `response_format`
 * of an unknown type or a json_schema without a name.
 */
function invalidParams(body: Record<string, unknown>): string | null {
  const n = body.n;
  if (n !== undefined && (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 128)) return "Invalid 'n': integer below minimum value or above maximum value (1 to 128).";
  if (body.top_logprobs !== undefined && body.logprobs !== true) return "Invalid value for 'top_logprobs': 'logprobs' must be set to true if 'top_logprobs' is used.";
  if (body.parallel_tool_calls !== undefined && !(Array.isArray(body.tools) && body.tools.length > 0)) return "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.";
  const format = body.response_format;
  if (format !== undefined) {
    if (!isObject(format) || !['text', 'json_object', 'json_schema'].includes(String(format.type))) return "Invalid value for 'response_format.type': expected one of 'text', 'json_object', 'json_schema'.";
    if (format.type === 'json_schema' && !(isObject(format.json_schema) && typeof format.json_schema.name === 'string')) return "Missing required parameter: 'response_format.json_schema.name'.";
  }
  return null;
}

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

  parseChat(body, route): ParsedChat | { invalid: string; param?: string } {
    const messages = (body.messages as Message[] | undefined) ?? [];
    if (!Array.isArray(messages) || messages.length === 0) return { invalid: "'messages' is a required property" };
    const invalid = invalidParams(body);
    if (invalid) return { invalid };
    const model = route.model ?? String(body.model ?? '');
    const effort = invalidReasoningEffort(body, model);
    if (effort) return effort;
    // The turn answered is the last one not a system message: instructions may follow it.
    const last = messages.findLast((m) => m.role !== 'system' && m.role !== 'developer') ?? messages.at(-1)!;
    const format = body.response_format as { type?: string; json_schema?: { schema?: Record<string, unknown> } } | undefined;
    const tools = ((body.tools as Array<{ function: ToolSpec }> | undefined) ?? []).map((t) => t.function);
    const choice = body.tool_choice as string | { function?: { name?: string } } | undefined;
    return {
      model,
      stream: body.stream === true,
      includeUsage: (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true,
      promptText: messages.map((m) => textOf(m.content)).join(' '),
      tools,
      toolChoice: typeof choice === 'string' ? (choice === 'auto' || choice === 'required' ? undefined : choice) : choice?.function?.name,
      lastRole: last.role === 'tool' ? 'tool' : last.role === 'assistant' ? 'assistant' : 'user',
      lastToolResult: last.role === 'tool' ? textOf(last.content) : undefined,
      maxTokens: (body.max_completion_tokens ?? body.max_tokens) as number | undefined,
      params: Object.keys(body),
      choices: (body.n as number | undefined) ?? 1,
      parallelToolCalls: body.parallel_tool_calls as boolean | undefined,
      ...(format?.type === 'json_object' && { json: {} }),
      ...(format?.type === 'json_schema' && { json: { schema: format.json_schema?.schema } }),
      ...(body.logprobs === true && { logprobs: { top: (body.top_logprobs as number | undefined) ?? 0 } }),
      serviceTier: pricedTier(body.service_tier),
    };
  },

  answer(ctx) {
    const turn = ctx.turn;
    const message = turn.kind === 'tool'
      ? { role: 'assistant', content: null, tool_calls: turn.calls.map((c, i) => ({ id: toolCallId(ctx, i), type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } })) }
      : { role: 'assistant', content: turn.text, refusal: null };
    const logprobs = ctx.logprobs && turn.kind === 'text' ? { content: pieces(turn.text).map((p) => tokenLogprob(p, ctx.logprobs!.top)), refusal: null } : null;
    return {
      id: `chatcmpl-${ctx.id}`,
      object: 'chat.completion',
      created: ctx.created,
      model: ctx.model,
      choices: Array.from({ length: ctx.choices }, (_, index) => ({ index, message, logprobs, finish_reason: finishReason(ctx) })),
      ...(!ctx.directives.noUsage && { usage: usage(ctx) }),
      system_fingerprint: 'fp_sandbox',
    };
  },

  stream(ctx): Frame[] {
    const chunk = (index: number, delta: object, finish: string | null = null, logprobs: unknown = null) => JSON.stringify({
      id: `chatcmpl-${ctx.id}`, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model,
      choices: [{ index, delta, logprobs, finish_reason: finish }],
    });
    const turn = ctx.turn;
    const frames: Frame[] = [];
    for (let index = 0; index < ctx.choices; index += 1) {
      frames.push({ data: chunk(index, { role: 'assistant', content: '' }) });
      if (turn.kind === 'tool') {
        turn.calls.forEach((call, i) => {
          const args = JSON.stringify(call.arguments);
          const half = Math.ceil(args.length / 2);
          frames.push({ content: true, data: chunk(index, { tool_calls: [{ index: i, id: toolCallId(ctx, i), type: 'function', function: { name: call.name, arguments: args.slice(0, half) } }] }) });
          frames.push({ content: true, data: chunk(index, { tool_calls: [{ index: i, function: { arguments: args.slice(half) } }] }) });
        });
      } else {
        for (const piece of pieces(turn.text)) frames.push({ content: true, data: chunk(index, { content: piece }, null, ctx.logprobs ? { content: [tokenLogprob(piece, ctx.logprobs.top)], refusal: null } : null) });
      }
      frames.push({ data: chunk(index, {}, finishReason(ctx)) });
    }
    if (ctx.includeUsage && !ctx.directives.noUsage) frames.push({ data: JSON.stringify({ id: `chatcmpl-${ctx.id}`, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [], usage: usage(ctx) }) });
    frames.push({ data: '[DONE]' });
    return frames;
  },

  // OpenAI bills the completion whole: its reasoning tokens are within completion_tokens.
  billed: completionBilled,
};
