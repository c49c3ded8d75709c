import { DROPPABLE_PARAMS } from '../../chat/prepare';
import { classifyByStatus } from '../errors';
import type { ChatBody, ChatResult, FinishReason, StreamDecoder, StreamOutput, ToolCall, Usage } from '../types';

/**
 * OpenAI's own Responses wire (`POST /responses`), for a Responses request served by an OpenAI
 * connection as it came (NATIVE_REQUEST `openai-responses`, issue 35): the request as sent, and
 * the answer and its events read into the chat vocabulary the gateway's tally, guardrails and
 * cache work on. Pure transforms; the adapter is openai.ts.
 */

type ResponsesUsage = { input_tokens?: number; output_tokens?: number; total_tokens?: number; input_tokens_details?: { cached_tokens?: number }; output_tokens_details?: { reasoning_tokens?: number } };
type OutputItem = { type?: string; id?: string; call_id?: string; name?: string; arguments?: string; content?: Array<{ type?: string; text?: string }> };
type ResponseObject = { model?: string; status?: string; incomplete_details?: { reason?: string } | null; output?: OutputItem[]; usage?: ResponsesUsage | null; error?: { code?: string; message?: string } | null };

/**
 * The client's Responses body as OpenAI is sent it: with the candidate's model, the output cap
 * the chat body carries (the one the budget held), without the sampling parameters the chat
 * body no longer has (dropped for this model), and never kept by OpenAI (`store: false`): the
 * gateway keeps responses itself, under the organization's retention and reach rules.
 */
export function nativeResponsesRequest(request: Record<string, unknown>, body: ChatBody, model: string, stream: boolean): Record<string, unknown> {
  const sent: Record<string, unknown> = Object.assign({}, request, { model, store: false });
  const cap = body.max_completion_tokens ?? body.max_tokens;
  if (cap !== undefined) sent.max_output_tokens = cap;
  for (const k of DROPPABLE_PARAMS) if (sent[k] !== undefined && body[k] === undefined) delete sent[k];
  if (stream) sent.stream = true;
  else delete sent.stream;
  return sent;
}

export function mapResponsesUsage(u: ResponsesUsage | null | undefined): Usage | null {
  if (!u) return null;
  const prompt = u.input_tokens ?? 0;
  const completion = u.output_tokens ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: u.total_tokens ?? prompt + completion,
    ...(u.input_tokens_details?.cached_tokens !== undefined && { prompt_tokens_details: { cached_tokens: u.input_tokens_details.cached_tokens } }),
    ...(u.output_tokens_details?.reasoning_tokens !== undefined && { completion_tokens_details: { reasoning_tokens: u.output_tokens_details.reasoning_tokens } }),
  };
}

function finishOf(r: ResponseObject, calls: number): FinishReason {
  if (r.status === 'incomplete') return r.incomplete_details?.reason === 'content_filter' ? 'content_filter' : 'length';
  return calls > 0 ? 'tool_calls' : 'stop';
}

const textOf = (item: OutputItem) => (item.content ?? []).filter((p) => p.type === 'output_text').map((p) => p.text ?? '').join('');

/** A response object as a chat result; the object itself is kept as `native`. */
export function parseResponsesObject(json: unknown): ChatResult {
  const r = (json ?? {}) as ResponseObject;
  const output = r.output ?? [];
  const text = output.filter((o) => o.type === 'message').map(textOf).join('');
  const calls: ToolCall[] = output.filter((o) => o.type === 'function_call').map((o) => ({ id: o.call_id ?? '', type: 'function', function: { name: o.name ?? '', arguments: o.arguments ?? '' } }));
  return {
    native: json as Record<string, unknown>,
    model: r.model ?? null,
    choices: [{ index: 0, message: { role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length > 0 && { tool_calls: calls }) }, finish_reason: finishOf(r, calls.length) }],
    usage: mapResponsesUsage(r.usage),
  };
}

/**
 * Responses stream events in the chat vocabulary, each passed along first as it came (the
 * client speaks this wire): text deltas, function calls (an item added, then argument deltas),
 * the model, and at the end (`response.completed` or `response.incomplete`) the finish and
 * usage; `response.failed` and `error` are failures.
 */
export function responsesStreamDecoder(): StreamDecoder {
  const toolIndexOfItem = new Map<number, number>();
  const delta = (d: Record<string, unknown>, finish: FinishReason | null = null): StreamOutput => ({ type: 'delta', choices: [{ index: 0, delta: d, finish_reason: finish }] });
  const translate = (event: string, e: { response?: ResponseObject; item?: OutputItem; output_index?: number; delta?: string; code?: string; message?: string }): StreamOutput[] => {
    switch (event) {
      case 'response.created':
        return [...(e.response?.model ? [{ type: 'model' as const, model: e.response.model }] : []), delta({ role: 'assistant', content: '' })];
      case 'response.output_text.delta':
        return e.delta ? [delta({ content: e.delta })] : [];
      case 'response.output_item.added':
        if (e.item?.type !== 'function_call') return [];
        toolIndexOfItem.set(e.output_index ?? 0, toolIndexOfItem.size);
        return [delta({ tool_calls: [{ index: toolIndexOfItem.get(e.output_index ?? 0)!, id: e.item.call_id, type: 'function', function: { name: e.item.name ?? '', arguments: '' } }] })];
      case 'response.function_call_arguments.delta':
        return e.delta ? [delta({ tool_calls: [{ index: toolIndexOfItem.get(e.output_index ?? 0) ?? 0, function: { arguments: e.delta } }] })] : [];
      case 'response.completed':
      case 'response.incomplete': {
        const r = e.response ?? {};
        const usage = mapResponsesUsage(r.usage);
        return [delta({}, finishOf(r, toolIndexOfItem.size)), ...(usage ? [{ type: 'usage' as const, usage }] : []), { type: 'done' }];
      }
      case 'response.failed':
      case 'error':
        return [{ type: 'error', failure: classifyByStatus(500, { error: { message: e.message ?? e.response?.error?.message ?? 'the response failed', code: e.code ?? e.response?.error?.code } }, {}) }];
      default:
        return [];
    }
  };
  return ({ event, data }) => {
    const e = JSON.parse(data) as { type?: string };
    const type = e.type ?? event ?? '';
    return [{ type: 'native', event: type, data }, ...translate(type, e as Parameters<typeof translate>[1])];
  };
}
