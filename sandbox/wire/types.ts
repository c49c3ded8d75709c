import type http from 'node:http';
import type { Directives } from '../directives';
import type { BillUnits } from '../bill';
import type { ToolSpec, Turn } from '../turn';

/** A chat request as the simulator needs it, whatever the wire. */
export type ParsedChat = {
  model: string;
  stream: boolean;
  includeUsage: boolean;
  promptText: string;
  tools: ToolSpec[];
  toolChoice?: string;
  lastRole: 'user' | 'tool' | 'assistant' | 'system';
  lastToolResult?: string;
  maxTokens?: number;
  /** Top-level parameters present, for `refuse_param`. */
  params: string[];
  /** How many answers to give (OpenAI `n`, Gemini `candidateCount`); 1 when absent. */
  choices?: number;
  /** False when the request turned parallel tool calls off. */
  parallelToolCalls?: boolean;
  /** Structured output asked for (JSON mode, or a JSON schema). */
  json?: { schema?: Record<string, unknown> };
  /** Token log probabilities asked for, with this many alternatives each (OpenAI wire). */
  logprobs?: { top: number };
  /** Extended thinking asked for (Anthropic `thinking`): a signed thinking block before the answer. */
  thinking?: boolean;
  /** What only this wire answers with, as its parser read it (Responses' reasoning options); handed to its answer. */
  extra?: unknown;
  /** OpenAI's `service_tier` when it changes the price (`priority`, `flex`). */
  serviceTier?: string;
};

export type Frame = { event?: string; data: string; content?: boolean };

export type AnswerContext = { id: string; created: number; directives: Directives; turn: Turn & { truncated: boolean }; model: string; includeUsage: boolean; choices: number; logprobs?: { top: number }; thinking?: boolean; extra?: unknown };

/** Output tokens over every answer given (`n` answers cost n times one). */
export const completionTokens = (ctx: AnswerContext) => ctx.turn.completionTokens * ctx.choices;

/**
 * The bill of a wire that counts reasoning within the completion (OpenAI's completion_tokens,
 * Gemini's candidates plus thoughts): the prompt, its cached part, the whole completion.
 */
export const completionBilled = (ctx: AnswerContext): BillUnits => ({
  input_tokens: ctx.turn.promptTokens, cache_read_tokens: ctx.directives.cached ?? 0, output_tokens: completionTokens(ctx), reasoning_tokens: ctx.directives.reasoning ?? 0,
});

/** Whether a value is a plain JSON object. */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One provider's wire format, as data and pure functions. */
export type Wire = {
  credential(req: http.IncomingMessage, url: URL): string | undefined;
  unauthorized(): [number, unknown];
  /** The provider's error body for a status; `param` for an unsupported-parameter 400. */
  error(status: number, message: string, extra?: { param?: string; moderation?: boolean }): unknown;
  models(ids: string[]): unknown;
  /**
   * A refusal of the request itself (e.g. a required field missing; `param` for a parameter the
   * model does not take), or the parsed request. `betas`: Anthropic's `anthropic-beta` features.
   */
  parseChat(body: Record<string, unknown>, route: { model?: string; stream?: boolean; betas?: readonly string[] }): ParsedChat | { invalid: string; param?: string };
  answer(ctx: AnswerContext): unknown;
  stream(ctx: AnswerContext): Frame[];
  /** What the provider bills for the whole answer (sandbox/bill.ts), whatever part of it is read. */
  billed(ctx: AnswerContext): BillUnits;
};

/** A tier that changes OpenAI's price, as a request named it. */
export function pricedTier(value: unknown): string | undefined {
  return value === 'priority' || value === 'flex' ? value : undefined;
}

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === 'object' && p && 'text' in p ? String((p as { text: unknown }).text) : '')).join(' ');
  return '';
}
