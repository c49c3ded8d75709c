import type { Choice, ChunkChoice, ToolCall, Usage } from '../providers/types';

/** Who made a kept answer, and when: what tells whether a later request could have used it. */
export type CachedServing = {
  /** The request that produced it (`X-GW-Cache-Source`, `cache.source_request_id`). */
  requestId: string;
  /** When it was stored, in ms since the epoch (`age_seconds`). */
  storedAt: number;
  model: string;
  provider: string;
  connection: string;
  /** The model name the connection was sent (absent on entries stored before it was kept). */
  upstreamModel?: string;
  route: string;
};

/** What the cache keeps of a chat answer: enough to answer again, whole or streamed. */
export type CachedAnswer = CachedServing & {
  choices: Choice[];
  usage: Usage | null;
};

/**
 * Builds whole choices from a stream's chunks, as it goes: text appended, tool calls joined by
 * their index (the first piece carries id and name, later ones argument text).
 */
export class ChoiceAssembler {
  /** Choices as they build up; a choice's finish reason arrives with its last chunk. */
  private readonly byIndex = new Map<number, Omit<Choice, 'finish_reason'> & { finish_reason: Choice['finish_reason'] | null }>();

  add(choices: readonly ChunkChoice[]): void {
    for (const c of choices) {
      let choice = this.byIndex.get(c.index);
      if (!choice) {
        choice = { index: c.index, message: { role: 'assistant', content: null }, finish_reason: null };
        this.byIndex.set(c.index, choice);
      }
      if (c.delta.content) choice.message.content = (choice.message.content ?? '') + c.delta.content;
      for (const t of c.delta.tool_calls ?? []) {
        const calls = (choice.message.tool_calls ??= []);
        let call = calls[t.index];
        if (!call) {
          call = { id: t.id ?? '', type: 'function', function: { name: t.function?.name ?? '', arguments: '' } } as ToolCall;
          calls[t.index] = call;
        }
        if (t.id) call.id = t.id;
        if (t.function?.name) call.function.name = t.function.name;
        if (t.function?.arguments) call.function.arguments += t.function.arguments;
      }
      if (c.finish_reason) choice.finish_reason = c.finish_reason;
    }
  }

  /** The whole choices once every one has finished, else null (a cut answer is never kept). */
  choices(): Choice[] | null {
    const all = [...this.byIndex.values()].sort((a, b) => a.index - b.index);
    return all.length > 0 && all.every((c) => c.finish_reason !== null) ? (all as Choice[]) : null;
  }
}

/**
 * A cached answer told again as a stream: per choice one chunk with the role and the whole
 * content (and tool calls), then one with its finish reason.
 */
export function replayChunks(choices: readonly Choice[]): ChunkChoice[][] {
  const chunks: ChunkChoice[][] = [];
  for (const choice of choices) {
    const delta: ChunkChoice['delta'] = { role: 'assistant', content: choice.message.content ?? '' };
    if (choice.message.tool_calls?.length) {
      delta.tool_calls = choice.message.tool_calls.map((t, index) => ({ index, id: t.id, type: 'function', function: { name: t.function.name, arguments: t.function.arguments } }));
    }
    chunks.push([{ index: choice.index, delta, finish_reason: null }]);
    chunks.push([{ index: choice.index, delta: {}, finish_reason: choice.finish_reason }]);
  }
  return chunks;
}
