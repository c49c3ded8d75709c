import type { ChatMessage } from '../types';

/** The text of a message's content, whether a string or a list of parts. */
export function textOf(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((p) => p.text ?? '').join('');
}

/** Tool-call arguments as an object; a model's malformed JSON becomes `{}` rather than a failure. */
export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text || '{}');
  } catch {
    return {};
  }
}
