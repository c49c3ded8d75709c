import { requestedMaxTokens } from '../../core/chat/prepare';
import type { ChatBody, ChatResult, Usage } from '../../core/providers/types';
import { choiceCount, estimateOutputTokens, estimatePromptTokens } from '../../core/spend/worst-case';

/**
 * What an answer is settled and logged at (a limit is a ceiling only if every answer costs what
 * it cost): the usage the provider reported once it is final; else (a stream broken off or
 * abandoned before its end, or a provider that reports nothing) an estimate from the prompt (as
 * the worst case estimates it), the output sent so far and the reasoning reported so far, never
 * below what was reported.
 * `final` says the answer ended, so a reported usage is the provider's whole count.
 */
export function billedUsage(body: ChatBody, reported: Usage | null, outputBytes: number, final: boolean): Usage {
  if (reported && final) return reported;
  const prompt = reported?.prompt_tokens || estimatePromptTokens(body);
  // The estimate leans high; it never passes the output cap the request set (per choice).
  const cap = requestedMaxTokens(body);
  // Reasoning the provider reported counts on top of the visible output, which does not show it.
  const delivered = estimateOutputTokens(outputBytes) + (reported?.completion_tokens_details?.reasoning_tokens ?? 0);
  const estimated = cap === undefined ? delivered : Math.min(delivered, cap * choiceCount(body));
  const completion = Math.max(reported?.completion_tokens ?? 0, estimated);
  return Object.assign({}, reported, { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });
}

/** What a whole answer is settled at: `billedUsage` over its text and tool calls. */
export function wholeAnswerUsage(body: ChatBody, result: ChatResult): Usage {
  const bytes = result.choices.reduce((n, c) => n + outputBytes(c.message.content, c.message.tool_calls), 0);
  return billedUsage(body, result.usage, bytes, true);
}

type ToolCallPart = { function?: { name?: string; arguments?: string } };

/**
 * UTF-8 bytes of generated output: text, and tool calls' names and arguments. One count for a
 * stream's deltas (api/gateway/stream-answer.ts) and a whole answer's messages.
 */
export function outputBytes(content: string | null | undefined, toolCalls: readonly ToolCallPart[] | undefined): number {
  let bytes = typeof content === 'string' ? Buffer.byteLength(content) : 0;
  for (const t of toolCalls ?? []) bytes += Buffer.byteLength(t.function?.arguments ?? '') + Buffer.byteLength(t.function?.name ?? '');
  return bytes;
}
