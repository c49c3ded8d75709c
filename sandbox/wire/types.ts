import type http from 'node:http';
import type { Directives } from '../directives';
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
};

export type Frame = { event?: string; data: string; content?: boolean };

export type AnswerContext = { id: string; created: number; directives: Directives; turn: Turn & { truncated: boolean }; model: string; includeUsage: boolean };

/** One provider's wire format, as data and pure functions. */
export type Wire = {
  credential(req: http.IncomingMessage, url: URL): string | undefined;
  unauthorized(): [number, unknown];
  /** The provider's error body for a status; `param` for an unsupported-parameter 400. */
  error(status: number, message: string, extra?: { param?: string; moderation?: boolean }): unknown;
  models(ids: string[]): unknown;
  /** A refusal of the request itself (e.g. a required field missing), or the parsed request. */
  parseChat(body: Record<string, unknown>, route: { model?: string; stream?: boolean }): ParsedChat | { invalid: string };
  answer(ctx: AnswerContext): unknown;
  stream(ctx: AnswerContext): Frame[];
};

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === 'object' && p && 'text' in p ? String((p as { text: unknown }).text) : '')).join(' ');
  return '';
}
