import { requestedMaxTokens } from '../../core/chat/prepare';
import type { ChatBody, Choice, Usage } from '../../core/providers/types';
import { estimateOutputTokens, estimatePromptTokens } from '../../core/spend/worst-case';

/**
 * What an answer is settled and logged at (a limit is a ceiling only if every answer costs what
 * it cost): the usage the provider reported once it is final; else (a stream broken off or
 * abandoned before its end, or a provider that reports nothing) an estimate from the prompt (as
 * the worst case estimates it) and the output sent so far, never below what was reported.
 * `final` says the answer ended, so a reported usage is the provider's whole count.
 */
export function billedUsage(body: ChatBody, reported: Usage | null, outputBytes: number, final: boolean): Usage {
  if (reported && final) return reported;
  const prompt = reported?.prompt_tokens || estimatePromptTokens(body);
  // The estimate leans high; it never passes the output cap the request set (per choice).
  const cap = requestedMaxTokens(body);
  const delivered = estimateOutputTokens(outputBytes);
  const estimated = cap === undefined ? delivered : Math.min(delivered, cap * (typeof body.n === 'number' && body.n > 1 ? body.n : 1));
  const completion = Math.max(reported?.completion_tokens ?? 0, estimated);
  return { ...reported, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** UTF-8 bytes of a whole answer's output: its text and tool calls, as a stream's tally counts them. */
export function outputBytesOf(choices: readonly Choice[]): number {
  let bytes = 0;
  for (const c of choices) {
    if (typeof c.message.content === 'string') bytes += Buffer.byteLength(c.message.content);
    for (const t of c.message.tool_calls ?? []) bytes += Buffer.byteLength(t.function.arguments) + Buffer.byteLength(t.function.name);
  }
  return bytes;
}
