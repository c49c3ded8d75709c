import type { CostEstimate } from '../../../core/pricing/cost';
import type { ChunkChoice, Usage } from '../../../core/providers/types';
import type { ChatCall } from '../chat-call';
import type { AnswerExtras, AnswerIdentity, ChatWire, StreamEncoder } from '../chat-wire';
import { sseEvent } from '../stream-answer';

/** The usage object of spec 2.2: counts as reported, the cost estimate and where it came from. */
export function wireUsage(usage: Usage | null, estimate: CostEstimate): Record<string, unknown> {
  const { provider_cost: providerCost, cache_write_tokens: _writes, ...wire }: Record<string, unknown> = usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  wire.cost = estimate?.cost ?? null;
  if (estimate) wire.price_source = estimate.source;
  if (estimate?.source === 'provider' && providerCost !== undefined) wire.cost_usd = providerCost;
  return wire;
}

/**
 * A chat answer or chunk: one literal in the wire's order, then what this answer adds (usage,
 * guardrails, cache). Not a spread of the identity first: V8 makes an object that begins with a
 * spread and then gains properties the slow way (docs/decisions.md).
 */
function chatObject(call: ChatCall, who: AnswerIdentity, object: 'chat.completion' | 'chat.completion.chunk', choices: unknown[], extra?: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = {
    id: call.ctx.state.requestId,
    object,
    created: Math.floor(call.createdAt.getTime() / 1000),
    model: who.model,
    route: who.route,
    route_name: call.plan?.route?.slug ?? null,
    provider: who.provider,
    connection: who.connection,
    choices,
  };
  return extra ? Object.assign(body, extra) : body;
}

/** `usage`, `guardrails` when a guardrail acted, `cache` when the cache took part: the end of an answer (spec 2.2). */
function endFields(extras: AnswerExtras): Record<string, unknown> {
  const fields: Record<string, unknown> = { usage: wireUsage(extras.usage, extras.estimate) };
  if (extras.guardrails) fields.guardrails = extras.guardrails;
  if (extras.cache) fields.cache = extras.cache;
  return fields;
}

/**
 * Chat completions (spec 4.1, 6.4): chunks, then a usage chunk when the client asked for it,
 * then `[DONE]`; a stream broken off ends with one data event carrying the error object, and no
 * `[DONE]`.
 */
export const openAIChatWire: ChatWire = {
  endpoint: 'chat.completions',
  whole: (call, who, choices, extras) => chatObject(call, who, 'chat.completion', choices, endFields(extras)),
  stream(call, who, includeUsage): StreamEncoder {
    const at = (model: string): AnswerIdentity => (model === who.model ? who : { ...who, model });
    return {
      chunk: (model: string, choices: ChunkChoice[], guardrails?: unknown) =>
        sseEvent(chatObject(call, at(model), 'chat.completion.chunk', choices, guardrails ? { guardrails } : undefined)),
      complete: (model, extras) =>
        (includeUsage ? sseEvent(chatObject(call, at(model), 'chat.completion.chunk', [], endFields(extras))) : '') + sseEvent('[DONE]'),
      fail: (error) => sseEvent(error.toBody()),
    };
  },
};
