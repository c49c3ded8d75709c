import type { GatewayError } from '../../core/errors';
import type { Choice, ChunkChoice, Usage } from '../../core/providers/types';
import type { CostEstimate } from '../../core/pricing/cost';
import type { NativeEvent } from './stream-answer';
import type { ChatCall } from './chat-call';

/** Who served an answer, as its body and every chunk say it (spec 2.2). */
export type AnswerIdentity = { model: string; route: string; provider: string; connection: string };

/** What the gateway adds to an answer's end: usage with its cost, guardrails, cache. */
export type AnswerExtras = {
  /** Counts as reported; null when the provider reported none. */
  usage: Usage | null;
  /** The charge (null when unpriced); `gateway_cache` on a hit. */
  estimate: CostEstimate;
  guardrails?: unknown;
  cache?: unknown;
  /** The provider's own answer, when the request went to it in its own wire (NATIVE_REQUEST) and nothing must be checked in it. */
  native?: Record<string, unknown>;
};

/**
 * One stream's encoder in a client's wire: each method returns the SSE text to write (possibly
 * empty, possibly several events). Made once per stream, so it may keep the wire's state
 * (which content block is open, say).
 */
export type StreamEncoder = {
  /**
   * A batch of choice deltas; `guardrails` rides on the chunks that finish a choice. `native`:
   * the provider's own event, when the request went to it in its own wire (the deltas of it
   * then come as a batch of their own).
   */
  chunk(model: string, choices: ChunkChoice[], guardrails?: unknown, native?: NativeEvent): string;
  /**
   * The end of a complete answer. A wire that must finish something before the client reads the
   * end (a Responses answer kept for `previous_response_id`) answers it when that is done.
   */
  complete(model: string, extras: AnswerExtras): string | Promise<string>;
  /** A stream broken off, or refused at its end: the wire's own error event. */
  fail(error: GatewayError): string;
};

/**
 * A client protocol the chat call answers in (chat completions, Anthropic Messages, OpenAI
 * Responses): the routes translate the request in; the wire renders the answer out. Routing,
 * failover, spend, cache, guardrails and the request log are the chat call's, whatever the wire.
 */
export type ChatWire = {
  /** The request log's `endpoint`. */
  endpoint: string;
  /** A whole answer's body. */
  whole(call: ChatCall, who: AnswerIdentity, choices: Choice[], extras: AnswerExtras): unknown;
  /** A stream's encoder. `includeUsage`: the client asked for the usage at the end (chat's `stream_options`). */
  stream(call: ChatCall, who: AnswerIdentity, includeUsage: boolean): StreamEncoder;
};
