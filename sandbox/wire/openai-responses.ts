import { pieces, type ToolSpec } from '../turn';
import { openaiWire } from './openai';
import { completionBilled, completionTokens, isObject, pricedTier, textOf, type AnswerContext, type Frame, type ParsedChat, type Wire } from './types';

/**
 * OpenAI's Responses API (`POST /openai/v1/responses`), as OpenAI's own connections serve it to
 * the gateway when a Responses client's request goes through as it came: a response object, or
 * the semantic stream events with sequence numbers. A request with `reasoning` gets a reasoning
 * item first (with a summary when `reasoning.summary` is asked, streamed part by part, and
 * encrypted content when `include` names `reasoning.encrypted_content`), which only this wire
 * carries. Tools and input items of every type the real API takes are accepted (the model calls
 * only top-level functions); an unknown one is refused as the real API refuses it. Nothing is
 * kept: `previous_response_id` is 404, as for a response OpenAI never stored.
 */

/**
 * The parameters the real API takes (the `openai` SDK's `ResponseCreateParams`, and
 * `client_metadata`, which the Codex CLI sends OpenAI on every request); any other is
 * `400 unknown_parameter`.
 */
const KNOWN = new Set([
  'model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'temperature', 'top_p', 'max_output_tokens',
  'text', 'reasoning', 'user', 'metadata', 'stream', 'store', 'previous_response_id', 'include', 'truncation', 'service_tier',
  'prompt_cache_key', 'safety_identifier', 'background', 'top_logprobs', 'stream_options', 'max_tool_calls', 'conversation', 'prompt',
  'prompt_cache_retention', 'prompt_cache_options', 'context_management', 'moderation', 'client_metadata',
]);

/** The tool types the real API takes (the SDK's `Tool`); any other is refused naming the tool. */
const TOOL_TYPES = new Set([
  'function', 'custom', 'namespace', 'file_search', 'computer', 'computer_use_preview', 'web_search', 'web_search_2025_08_26',
  'web_search_preview', 'web_search_preview_2025_03_11', 'mcp', 'code_interpreter', 'programmatic_tool_calling', 'image_generation',
  'local_shell', 'shell', 'tool_search', 'apply_patch',
]);

/** The input item types the real API takes (the SDK's `ResponseInputItem`; a message may leave its type out). */
const ITEM_TYPES = new Set([
  'message', 'function_call', 'function_call_output', 'reasoning', 'item_reference', 'file_search_call', 'computer_call',
  'computer_call_output', 'web_search_call', 'tool_search_call', 'tool_search_output', 'additional_tools', 'compaction',
  'compaction_trigger', 'image_generation_call', 'code_interpreter_call', 'local_shell_call', 'local_shell_call_output', 'shell_call',
  'shell_call_output', 'apply_patch_call', 'apply_patch_call_output', 'mcp_list_tools', 'mcp_approval_request', 'mcp_approval_response',
  'mcp_call', 'custom_tool_call', 'custom_tool_call_output', 'program', 'program_output',
]);

const MESSAGE_ROLES = new Set(['user', 'assistant', 'system', 'developer']);

type Item = Record<string, unknown>;

/**
 * The first thing in the tools or input the real API would refuse, in its words (`tools[1].type`
 * and the like are in the message: the sandbox's error `param` means an unsupported one), or null.
 */
function refusalOf(tools: Item[], items: Item[]): string | null {
  const supported = (values: Set<string>) => [...values].map((x) => `'${x}'`).join(', ');
  for (const [i, t] of tools.entries()) {
    if (!TOOL_TYPES.has(String(t.type))) return `Invalid value for 'tools[${i}].type': '${String(t.type)}'. Supported values are: ${supported(TOOL_TYPES)}.`;
    if ((t.type === 'function' || t.type === 'custom' || t.type === 'namespace') && typeof t.name !== 'string') return `Missing required parameter: 'tools[${i}].name'.`;
  }
  for (const [i, item] of items.entries()) {
    const type = String(item.type ?? 'message');
    if (!ITEM_TYPES.has(type)) return `Invalid value for 'input[${i}].type': '${type}'. Supported values are: ${supported(ITEM_TYPES)}.`;
    if (type === 'message' && !MESSAGE_ROLES.has(String(item.role))) return `Invalid value for 'input[${i}].role': '${String(item.role)}'. Supported values are: ${supported(MESSAGE_ROLES)}.`;
  }
  return null;
}
type Extra = { reasoning: { summary: boolean; encrypted: boolean } | null; instructions: string | null; body: Record<string, unknown> };

const extraOf = (ctx: AnswerContext) => ctx.extra as Extra;
const respId = (ctx: AnswerContext) => `resp_${ctx.id}`;
const msgId = (ctx: AnswerContext) => `msg_${ctx.id}`;
const callItemId = (ctx: AnswerContext, i: number) => `fc_${ctx.id}_${i}`;
const callId = (ctx: AnswerContext, i: number) => `call_${ctx.id.slice(-12)}${i > 0 ? `_${i}` : ''}`;

function textOfItem(item: Item): string {
  if (item.type === 'function_call_output') return String(item.output ?? '');
  if (item.type === 'function_call') return String(item.arguments ?? '');
  return textOf(item.content);
}

function reasoningItem(ctx: AnswerContext): Item | null {
  const r = extraOf(ctx).reasoning;
  if (!r) return null;
  return {
    type: 'reasoning', id: `rs_${ctx.id}`,
    summary: r.summary ? [{ type: 'summary_text', text: 'The sandbox thought it over.' }] : [],
    ...(r.encrypted && { encrypted_content: Buffer.from(`sandbox reasoning ${ctx.id}`).toString('base64') }),
  };
}

function outputOf(ctx: AnswerContext): Item[] {
  const turn = ctx.turn;
  const items: Item[] = [];
  const reasoning = reasoningItem(ctx);
  if (reasoning) items.push(reasoning);
  if (turn.kind === 'tool') {
    turn.calls.forEach((c, i) => items.push({ type: 'function_call', id: callItemId(ctx, i), call_id: callId(ctx, i), name: c.name, arguments: JSON.stringify(c.arguments), status: 'completed' }));
  } else {
    items.push({ type: 'message', id: msgId(ctx), status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: turn.text, annotations: [] }] });
  }
  return items;
}

function usageOf(ctx: AnswerContext) {
  const input = ctx.turn.promptTokens;
  const output = completionTokens(ctx);
  return {
    input_tokens: input, input_tokens_details: { cached_tokens: ctx.directives.cached ?? 0 },
    output_tokens: output, output_tokens_details: { reasoning_tokens: ctx.directives.reasoning ?? 0 },
    total_tokens: input + output,
  };
}

function responseOf(ctx: AnswerContext, status: 'in_progress' | 'completed' | 'incomplete', output: Item[]): Item {
  const { body, instructions } = extraOf(ctx);
  return {
    id: respId(ctx), object: 'response', created_at: ctx.created, status, error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions, max_output_tokens: body.max_output_tokens ?? null, model: ctx.model, output,
    parallel_tool_calls: body.parallel_tool_calls ?? true, previous_response_id: null, reasoning: body.reasoning ?? { effort: null, summary: null },
    store: body.store ?? true, temperature: body.temperature ?? 1, text: body.text ?? { format: { type: 'text' } }, tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [], top_p: body.top_p ?? 1, truncation: body.truncation ?? 'disabled',
    usage: status === 'in_progress' || ctx.directives.noUsage ? null : usageOf(ctx), user: body.user ?? null, metadata: body.metadata ?? {},
  };
}

const finalStatus = (ctx: AnswerContext) => (ctx.turn.kind === 'text' && ctx.turn.truncated ? 'incomplete' : 'completed');

export const openaiResponsesWire: Wire = {
  credential: openaiWire.credential,
  unauthorized: openaiWire.unauthorized,
  error: openaiWire.error,
  models: openaiWire.models,

  parseChat(body, route): ParsedChat | { invalid: string } {
    const unknown = Object.keys(body).find((k) => !KNOWN.has(k));
    if (unknown) return { invalid: `Unknown parameter: '${unknown}'.` };
    if (typeof body.previous_response_id === 'string') return { invalid: `Previous response with id '${body.previous_response_id}' not found.` };
    const input = body.input;
    const items: Item[] = typeof input === 'string' ? [{ role: 'user', content: input }] : Array.isArray(input) ? (input as Item[]) : [];
    if (items.length === 0) return { invalid: "Missing required parameter: 'input'." };
    const offered = Array.isArray(body.tools) ? (body.tools as Item[]) : [];
    const refusal = refusalOf(offered, items);
    if (refusal) return { invalid: refusal };
    // The model calls top-level functions only (a namespace's and the built-in tools are offered, never used).
    const tools = offered.filter((t) => t.type === 'function').map((t) => ({ name: String(t.name), parameters: t.parameters }) as ToolSpec);
    const last = items.at(-1)!;
    const format = (body.text as { format?: { type?: string; schema?: Record<string, unknown> } } | undefined)?.format;
    const choice = body.tool_choice as string | { name?: string } | undefined;
    const reasoning = isObject(body.reasoning) ? body.reasoning : null;
    const include = Array.isArray(body.include) ? body.include : [];
    const extra: Extra = {
      reasoning: reasoning ? { summary: reasoning.summary != null, encrypted: include.includes('reasoning.encrypted_content') } : null,
      instructions: typeof body.instructions === 'string' ? body.instructions : null,
      body,
    };
    return {
      model: route.model ?? String(body.model ?? ''),
      stream: body.stream === true,
      includeUsage: true,
      promptText: [extra.instructions ?? '', ...items.map(textOfItem)].join(' '),
      tools,
      toolChoice: typeof choice === 'string' ? (choice === 'auto' || choice === 'required' ? undefined : choice) : choice?.name,
      lastRole: last.type === 'function_call_output' ? 'tool' : last.role === 'assistant' || last.type === 'function_call' ? 'assistant' : 'user',
      lastToolResult: last.type === 'function_call_output' ? String(last.output ?? '') : undefined,
      maxTokens: body.max_output_tokens as number | undefined,
      params: Object.keys(body),
      parallelToolCalls: body.parallel_tool_calls as boolean | undefined,
      ...(format?.type === 'json_object' && { json: {} }),
      ...(format?.type === 'json_schema' && { json: { schema: format.schema } }),
      extra,
      serviceTier: pricedTier(body.service_tier),
    };
  },

  answer: (ctx) => responseOf(ctx, finalStatus(ctx), outputOf(ctx)),

  stream(ctx): Frame[] {
    let seq = 0;
    const frame = (type: string, data: Item, content = false): Frame => ({ event: type, data: JSON.stringify({ type, sequence_number: seq++, ...data }), content });
    const frames: Frame[] = [];
    const output = outputOf(ctx);
    frames.push(frame('response.created', { response: responseOf(ctx, 'in_progress', []) }));
    frames.push(frame('response.in_progress', { response: responseOf(ctx, 'in_progress', []) }));
    output.forEach((item, index) => {
      if (item.type === 'reasoning') {
        // The summary streams part by part, as the real API's does.
        frames.push(frame('response.output_item.added', { output_index: index, item: { ...item, summary: [] } }));
        (item.summary as Array<{ type: string; text: string }>).forEach((part, summaryIndex) => {
          const at = { item_id: item.id, output_index: index, summary_index: summaryIndex };
          frames.push(frame('response.reasoning_summary_part.added', { ...at, part: { type: 'summary_text', text: '' } }));
          for (const piece of pieces(part.text)) frames.push(frame('response.reasoning_summary_text.delta', { ...at, delta: piece }));
          frames.push(frame('response.reasoning_summary_text.done', { ...at, text: part.text }));
          frames.push(frame('response.reasoning_summary_part.done', { ...at, part }));
        });
        frames.push(frame('response.output_item.done', { output_index: index, item }));
      } else if (item.type === 'function_call') {
        const args = String(item.arguments);
        const half = Math.ceil(args.length / 2);
        frames.push(frame('response.output_item.added', { output_index: index, item: { ...item, arguments: '', status: 'in_progress' } }));
        frames.push(frame('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta: args.slice(0, half) }, true));
        frames.push(frame('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta: args.slice(half) }, true));
        frames.push(frame('response.function_call_arguments.done', { item_id: item.id, output_index: index, arguments: args }));
        frames.push(frame('response.output_item.done', { output_index: index, item }));
      } else {
        const text = ctx.turn.kind === 'text' ? ctx.turn.text : '';
        const at = { item_id: item.id, output_index: index, content_index: 0 };
        frames.push(frame('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress', content: [] } }));
        frames.push(frame('response.content_part.added', { ...at, part: { type: 'output_text', text: '', annotations: [] } }));
        for (const piece of pieces(text)) frames.push(frame('response.output_text.delta', { ...at, delta: piece }, true));
        frames.push(frame('response.output_text.done', { ...at, text }));
        frames.push(frame('response.content_part.done', { ...at, part: { type: 'output_text', text, annotations: [] } }));
        frames.push(frame('response.output_item.done', { output_index: index, item }));
      }
    });
    const status = finalStatus(ctx);
    frames.push(frame(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: responseOf(ctx, status, output) }));
    return frames;
  },

  billed: completionBilled,
};
