/**
 * What the simulated model answers, independent of wire format: plain text, or a call to the
 * first offered tool (forced one if named) when the conversation has not used a tool yet.
 * Token counts are word counts, so tests can compute costs by hand.
 */
export type ToolSpec = { name: string; parameters?: { properties?: Record<string, { type?: string }>; required?: string[] } };

export type ToolUse = { name: string; arguments: Record<string, unknown> };

/** A tool turn calls one tool, or every offered tool at once when parallel calls are allowed and asked for. */
export type Turn =
  | { kind: 'text'; text: string; promptTokens: number; completionTokens: number }
  | { kind: 'tool'; calls: ToolUse[]; promptTokens: number; completionTokens: number };

type Schema = { type?: string | string[]; properties?: Record<string, Schema>; items?: Schema; enum?: unknown[]; const?: unknown; anyOf?: Schema[] };

/** A value that fits a JSON schema: what a model under structured output would write. */
export function exampleOf(schema: Schema | undefined): unknown {
  if (!schema) return 'sandbox';
  if (schema.const !== undefined) return schema.const;
  if (schema.enum?.length) return schema.enum[0];
  if (schema.anyOf?.length) return exampleOf(schema.anyOf[0]);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object': return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, exampleOf(v)]));
    case 'array': return [exampleOf(schema.items)];
    case 'number': case 'integer': return 1;
    case 'boolean': return true;
    case 'null': return null;
    default: return 'sandbox';
  }
}

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
  /** Call every offered tool at once (`parallel_tools` directive, when the wire's parallel switch is not off). */
  parallelTools?: boolean;
  /** Structured output asked for: the answer is JSON, fitting the schema when one was given. */
  json?: { schema?: Record<string, unknown> };
}): Turn & { truncated: boolean } {
  const promptTokens = Math.max(1, countWords(input.promptText));
  const wantsTool = input.tools.length > 0 && input.toolChoice !== 'none' && input.lastRole === 'user';
  if (wantsTool) {
    const forced = input.tools.find((t) => t.name === input.toolChoice);
    const chosen = forced ? [forced] : input.parallelTools ? input.tools : [input.tools[0]!];
    return { kind: 'tool', calls: chosen.map((t) => ({ name: t.name, arguments: exampleArguments(t) })), promptTokens, completionTokens: 5 * chosen.length, truncated: false };
  }
  const plain = input.reply
    ?? (input.lastRole === 'tool' ? `The tool said: ${input.lastToolResult ?? ''}` : `Hello from the sandbox model ${input.model}.`);
  let text = input.json ? JSON.stringify(input.json.schema ? exampleOf(input.json.schema) : { reply: plain }) : plain;
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
