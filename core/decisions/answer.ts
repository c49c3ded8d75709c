import type { ChatBody, ChatResult } from '../providers/types';

/**
 * The model's side of a decision (issue 24) as pure functions: the chat body a policy sends,
 * and the JSON object read back from an answer.
 */

export type DecisionPolicyPrompt = { slug: string; instructions: string; outputSchema: Record<string, unknown>; maxTokens: number | null };

/** Said after the policy's own instructions, so a wire without structured output still gets the schema. */
export function schemaInstructions(schema: Record<string, unknown>): string {
  return `Answer with one JSON object and nothing else. It must be valid against this JSON Schema:\n${JSON.stringify(schema)}`;
}

/**
 * The chat request a decision makes: the instructions and the schema as the system message, the
 * input (JSON text unless it is a string already) as the user's, and the schema as structured
 * output (`response_format` json_schema, which each adapter turns into its wire's form).
 */
export function decisionChatBody(model: string, policy: DecisionPolicyPrompt, input: unknown): ChatBody {
  const system = [policy.instructions.trim(), schemaInstructions(policy.outputSchema)].filter(Boolean).join('\n\n');
  const body: ChatBody = {
    model,
    messages: [{ role: 'system', content: system }, { role: 'user', content: typeof input === 'string' ? input : JSON.stringify(input) }],
    response_format: { type: 'json_schema', json_schema: { name: schemaName(policy.slug), schema: policy.outputSchema } },
  } as ChatBody;
  if (policy.maxTokens !== null) body.max_tokens = policy.maxTokens;
  return body;
}

/** OpenAI's `json_schema.name`: letters, digits, `_` and `-`, at most 64. */
function schemaName(slug: string): string {
  return slug.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'decision';
}

/**
 * The JSON object an answer holds, or null: its first choice's text, allowing a Markdown code
 * fence around it (some models add one even when asked not to).
 */
export function answerObject(result: ChatResult): Record<string, unknown> | null {
  const content = result.choices[0]?.message?.content;
  if (typeof content !== 'string') return null;
  const text = withoutCodeFence(content.trim());
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : null;
  } catch {
    return null;
  }
}

/**
 * The text inside a Markdown code fence (```` ``` ```` or ```` ```json ````) that wraps the whole
 * answer, else the text. Plain string steps, linear in the answer's length: a backtracking
 * regular expression over a model's (or a provider's) text could stall the event loop.
 */
export function withoutCodeFence(text: string): string {
  if (text.length < 6 || !text.startsWith('```') || !text.endsWith('```')) return text;
  let inner = text.slice(3, -3);
  if (inner.slice(0, 4).toLowerCase() === 'json') inner = inner.slice(4);
  return inner.trim();
}
