import type { CallToolResult, ContentBlock } from '@modelcontextprotocol/sdk/types.js';
import type { JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { boundedCache } from '../bounded-cache';
import type { McpToolDefinition } from '../db/schema';
import { mcpAjvValidator, mcpTypes } from './sdk';
import { createSafeAjv, schemaTooLarge } from '../json-schema/safe-ajv';
import { PatternBudgetExceeded, withinPatternBudget } from '../patterns/user-pattern';

/**
 * The pure parts of a tool call on the agent endpoint (`/v1/mcp/{server_slug}`, issue 15):
 * refusal shapes, argument and result checks, and the texts guardrails read.
 */

/**
 * Spec 7 "Tool gateway": the codes of a refused tool call, their error type, and the HTTP
 * status the same refusal would have on a plain endpoint (what the request log records; the
 * agent itself gets HTTP 200 with a tool result flagged `isError`).
 */
export const TOOL_REFUSALS = {
  tool_not_allowed: { type: 'permission_denied', status: 403 },
  tool_not_approved: { type: 'permission_denied', status: 403 },
  tool_definition_changed: { type: 'permission_denied', status: 403 },
  invalid_tool_arguments: { type: 'invalid_request_error', status: 400 },
  tool_result_too_large: { type: 'upstream_error', status: 502 },
  tool_result_invalid: { type: 'upstream_error', status: 502 },
  upstream_unavailable: { type: 'upstream_error', status: 502 },
  upstream_rejected: { type: 'upstream_error', status: 502 },
  upstream_timeout: { type: 'request_timeout', status: 408 },
  guardrail_blocked: { type: 'permission_denied', status: 403 },
  guardrail_unavailable: { type: 'permission_denied', status: 403 },
} as const satisfies Record<string, { type: string; status: number }>;

export type ToolRefusalCode = keyof typeof TOOL_REFUSALS;

/** A refused tool call: answered as a tool result, logged with its type and code. */
export class ToolRefusal extends Error {
  readonly type: string;
  readonly status: number;
  constructor(readonly code: ToolRefusalCode, message: string) {
    super(message);
    this.name = 'ToolRefusal';
    this.type = TOOL_REFUSALS[code].type;
    this.status = TOOL_REFUSALS[code].status;
  }

  /** Spec 7: a tool result flagged as an error whose structured content is `{type, code, message}`. */
  toResult(): CallToolResult {
    return {
      content: [{ type: 'text', text: `${this.code}: ${this.message}` }],
      structuredContent: { type: this.type, code: this.code, message: this.message },
      isError: true,
    };
  }
}

/**
 * A validator of a tool's schema: ajv 8 through the MCP SDK's own provider, with its own Ajv
 * instance. A tool server's schema runs on the API's event loop: RE2 patterns, size, depth and
 * patterns bounded before anything is compiled (core/json-schema/safe-ajv.ts). Throws saying
 * what is wrong with a schema that cannot be used.
 */
function compileToolSchema(schema: unknown): JsonSchemaValidator<unknown> {
  // The `$schema` dialect marker is not needed to validate; an unknown one must not make ajv refuse to compile.
  const { $schema: _dialect, ...body } = (schema ?? {}) as Record<string, unknown>;
  const tooLarge = schemaTooLarge(body);
  if (tooLarge) throw new Error(tooLarge);
  const { AjvJsonSchemaValidator } = mcpAjvValidator();
  // As the SDK's own instance: all errors, no meta-schema check, the standard formats.
  const ajv = createSafeAjv({ allErrors: true, validateSchema: false });
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the SDK's dependency, loaded with it
  (require('ajv-formats') as (a: typeof ajv) => void)(ajv);
  return new AjvJsonSchemaValidator(ajv as never).getValidator<unknown>(body as JsonSchemaType);
}

/**
 * Validators of approved input and output schemas, compiled once per approved definition hash
 * (approve checked that they compile: toolSchemaProblem). Each entry has its own Ajv instance,
 * so an evicted entry takes its compiled code with it.
 */
const validators = boundedCache<string, JsonSchemaValidator<unknown>>(2000);

function validatorFor(cacheKey: string, schema: unknown): JsonSchemaValidator<unknown> {
  let validator = validators.get(cacheKey);
  if (!validator) {
    validator = compileToolSchema(schema);
    validators.set(cacheKey, validator);
  }
  return validator;
}

/**
 * What keeps a tool's definition from being approved, naming the field: an input or output
 * schema past the bounds or that does not compile; null when both compile. Approve asks, so a
 * definition agents are served compiles, within bounds, when its first call needs it.
 */
export function toolSchemaProblem(definition: McpToolDefinition): string | null {
  for (const field of ['inputSchema', 'outputSchema'] as const) {
    if (definition[field] === undefined) continue;
    try {
      compileToolSchema(definition[field]);
    } catch (err) {
      return `\`definition.${field}\`: ${(err as Error).message.slice(0, 300)}`;
    }
  }
  return null;
}

/**
 * A value checked within its budget of pattern work (core/patterns/user-pattern.ts): a value
 * too costly to check is not valid, whatever the schema's patterns would have said.
 */
function checked(validator: JsonSchemaValidator<unknown>, value: unknown): { valid: boolean; errorMessage?: string } {
  try {
    return withinPatternBudget(() => validator(value));
  } catch (err) {
    if (err instanceof PatternBudgetExceeded) return { valid: false, errorMessage: err.message };
    throw err;
  }
}

/** The arguments checked against the approved `inputSchema`, or `invalid_tool_arguments`. */
export function checkArguments(definition: McpToolDefinition, approvedSha256: string, args: Record<string, unknown>): void {
  let validator: JsonSchemaValidator<unknown>;
  try {
    validator = validatorFor(`in:${approvedSha256}`, definition.inputSchema ?? { type: 'object' });
  } catch (err) {
    throw new ToolRefusal('invalid_tool_arguments', `The tool's approved input schema cannot be used to check arguments (${(err as Error).message}).`);
  }
  const verdict = checked(validator, args);
  if (!verdict.valid) throw new ToolRefusal('invalid_tool_arguments', `The arguments do not match the tool's input schema: ${verdict.errorMessage}.`);
}

/** The JSON size of a result in UTF-8 bytes: what `max_result_bytes` bounds. */
export function resultBytes(result: unknown): number {
  return Buffer.byteLength(JSON.stringify(result), 'utf8');
}

/**
 * What an upstream answered, checked: larger than `max_result_bytes` is `tool_result_too_large`;
 * not an MCP `CallToolResult`, or (for a tool whose approved definition has an `outputSchema`)
 * a successful result without matching `structuredContent`, is `tool_result_invalid`.
 */
export function checkResult(raw: unknown, limits: { maxResultBytes: number }, definition: McpToolDefinition, approvedSha256: string): CallToolResult {
  const bytes = resultBytes(raw);
  if (bytes > limits.maxResultBytes) {
    throw new ToolRefusal('tool_result_too_large', `The tool's result is ${bytes} bytes, more than this server's \`max_result_bytes\` (${limits.maxResultBytes}).`);
  }
  const { CallToolResultSchema } = mcpTypes();
  const parsed = CallToolResultSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ToolRefusal('tool_result_invalid', `The server's answer is not a valid tool result${issue ? ` (${issue.path.join('.') || 'result'}: ${issue.message})` : ''}.`);
  }
  const result = parsed.data as CallToolResult;
  if (definition.outputSchema !== undefined && result.isError !== true) {
    if (result.structuredContent === undefined) throw new ToolRefusal('tool_result_invalid', 'The tool has an output schema but its result carries no structured content.');
    let validator: JsonSchemaValidator<unknown>;
    try {
      validator = validatorFor(`out:${approvedSha256}`, definition.outputSchema);
    } catch (err) {
      throw new ToolRefusal('tool_result_invalid', `The tool's approved output schema cannot be used (${(err as Error).message}).`);
    }
    const verdict = checked(validator, result.structuredContent);
    if (!verdict.valid) throw new ToolRefusal('tool_result_invalid', `The structured content does not match the tool's output schema: ${verdict.errorMessage}.`);
  }
  return result;
}

/**
 * Every string leaf of a JSON value (object values and array items, depth first), and a way to
 * rebuild the value with some of them replaced: what guardrails read and redact in tool
 * arguments and structured results. Keys are left alone.
 */
export function stringLeaves(value: unknown): { texts: string[]; rebuild(texts: readonly string[]): unknown } {
  const texts: string[] = [];
  const collect = (v: unknown): void => {
    if (typeof v === 'string') texts.push(v);
    else if (Array.isArray(v)) v.forEach(collect);
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(collect);
  };
  collect(value);
  return {
    texts,
    rebuild(replaced) {
      let i = 0;
      const put = (v: unknown): unknown => {
        if (typeof v === 'string') return replaced[i++];
        if (Array.isArray(v)) return v.map(put);
        if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, put(x)]));
        return v;
      };
      return put(value);
    },
  };
}

/**
 * Fields of a content item that are not text a model reads, and whose values have fixed forms a
 * redaction would break: the `type` discriminator, the media type, base64 payloads (`data` of an
 * image or audio item, `blob` of an embedded resource), the client hints in `annotations`
 * (audience enum, priority, timestamp) and `icons` (images).
 */
const UNSCANNED_ITEM_FIELDS = new Set(['type', 'mimeType', 'data', 'blob', 'annotations', 'icons']);

/** One level of an object split into the fields guardrails read and the ones kept as they are. */
function splitFields(value: Record<string, unknown>): { scanned: Record<string, unknown>; kept: Record<string, unknown> } {
  const scanned: Record<string, unknown> = {};
  const kept: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) (UNSCANNED_ITEM_FIELDS.has(k) ? kept : scanned)[k] = v;
  return { scanned, kept };
}

/**
 * The part of a content item guardrails read, and how to put it back: every string of the item
 * (text, an embedded resource's `uri` and `text`, a resource link's `name`, `title`,
 * `description` and `uri`, `_meta`, and whatever text field a later protocol revision adds)
 * except the fields in UNSCANNED_ITEM_FIELDS, at the item's level and its embedded resource's.
 */
function scannableItem(item: ContentBlock): { fields: Record<string, unknown>; restore(fields: Record<string, unknown>): ContentBlock } {
  const top = splitFields(item as unknown as Record<string, unknown>);
  const resource = top.scanned.resource;
  if (item.type !== 'resource' || resource === null || typeof resource !== 'object') {
    return { fields: top.scanned, restore: (fields) => ({ ...top.kept, ...fields }) as unknown as ContentBlock };
  }
  const inner = splitFields(resource as Record<string, unknown>);
  return {
    fields: { ...top.scanned, resource: inner.scanned },
    restore: (fields) => ({ ...top.kept, ...fields, resource: { ...inner.kept, ...(fields.resource as Record<string, unknown>) } }) as unknown as ContentBlock,
  };
}

/**
 * The texts of a result guardrails read, and a way to rebuild the result with them replaced:
 * every content item's text-bearing fields (scannableItem), then the string values of
 * `structuredContent`, then those of the result's other fields (`_meta` and any extension field
 * the server added: they reach the agent too). `isError` and binary payloads are left alone.
 */
export function resultTexts(result: CallToolResult): { texts: string[]; rebuild(texts: readonly string[]): CallToolResult } {
  const { content, structuredContent, isError: _flag, ...extra } = result;
  const items = content.map(scannableItem);
  const itemLeaves = items.map((i) => stringLeaves(i.fields));
  const structured = stringLeaves(structuredContent ?? null);
  const extraLeaves = stringLeaves(extra);
  const texts = [...itemLeaves.flatMap((l) => l.texts), ...structured.texts, ...extraLeaves.texts];
  return {
    texts,
    rebuild(replaced) {
      let at = 0;
      const take = (n: number) => replaced.slice(at, (at += n));
      const rebuiltContent = items.map((item, i) => item.restore(itemLeaves[i]!.rebuild(take(itemLeaves[i]!.texts.length)) as Record<string, unknown>));
      const rebuiltStructured = structured.rebuild(take(structured.texts.length));
      const out: CallToolResult = { ...result, ...(extraLeaves.rebuild(take(extraLeaves.texts.length)) as Record<string, unknown>), content: rebuiltContent };
      if (structuredContent !== undefined) out.structuredContent = rebuiltStructured as Record<string, unknown>;
      return out;
    },
  };
}
