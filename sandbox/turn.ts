/**
 * What the simulated model answers, independent of wire format: plain text, or a call to the
 * first offered tool (forced one if named) when the conversation has not used a tool yet.
 * Token counts are word counts, so tests can compute costs by hand.
 */
export type ToolSpec = { name: string; parameters?: { properties?: Record<string, { type?: string }>; required?: string[] } };

export type Turn =
  | { kind: 'text'; text: string; promptTokens: number; completionTokens: number }
  | { kind: 'tool'; name: string; arguments: Record<string, unknown>; promptTokens: number; completionTokens: number };

export function countWords(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

function exampleArguments(tool: ToolSpec): Record<string, unknown> {
  const props = tool.parameters?.properties ?? {};
  return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, v.type === 'number' || v.type === 'integer' ? 1 : v.type === 'boolean' ? true : 'sandbox']));
}

export function planTurn(input: {
  model: string;
  promptText: string;
  tools: ToolSpec[];
  /** A tool name to force, `none`, or undefined for automatic. */
  toolChoice?: string;
  lastRole: 'user' | 'tool' | 'assistant' | 'system';
  lastToolResult?: string;
  reply?: string;
  maxTokens?: number;
}): Turn & { truncated: boolean } {
  const promptTokens = Math.max(1, countWords(input.promptText));
  const wantsTool = input.tools.length > 0 && input.toolChoice !== 'none' && input.lastRole === 'user';
  if (wantsTool) {
    const tool = input.tools.find((t) => t.name === input.toolChoice) ?? input.tools[0]!;
    const args = exampleArguments(tool);
    return { kind: 'tool', name: tool.name, arguments: args, promptTokens, completionTokens: 5, truncated: false };
  }
  let text = input.reply
    ?? (input.lastRole === 'tool' ? `The tool said: ${input.lastToolResult ?? ''}` : `Hello from the sandbox model ${input.model}.`);
  let truncated = false;
  const words = text.split(/\s+/).filter(Boolean);
  if (input.maxTokens !== undefined && words.length > input.maxTokens) {
    text = words.slice(0, input.maxTokens).join(' ');
    truncated = true;
  }
  return { kind: 'text', text, promptTokens, completionTokens: countWords(text), truncated };
}

/** Splits text into stream pieces: one word (with its following space) per chunk. */
export function pieces(text: string): string[] {
  return text.match(/\S+\s*/g) ?? [text];
}
