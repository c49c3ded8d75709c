import { z } from 'zod';
import { GatewayError } from '../../../core/errors';
import { TRANSLATED_EFFORT, type ChatBody, type ChatMessage, type Choice, type ChunkChoice, type ContentPart, type FinishReason, type ToolDefinition, type Usage } from '../../../core/providers/types';
import { modelName } from '../../validation';
import { PROTOCOL_EXTENSION_FIELDS, PROTOCOL_EXTENSION_NAMES, withoutFields } from '../chat-request';
import type { AnswerExtras, AnswerIdentity, ChatWire, StreamEncoder } from '../chat-wire';
import type { NativeEvent } from '../stream-answer';
import type { ChatCall } from '../chat-call';

/**
 * Anthropic's Messages API as a client protocol (`POST /v1/messages`): the request translated
 * into the chat call's body, the answer rendered back in Messages' shapes and events. Pure
 * transforms; the route is api/gateway/messages.ts.
 */

const textBlock = z.looseObject({ type: z.literal('text'), text: z.string() });
const imageBlock = z.looseObject({
  type: z.literal('image'),
  source: z.union([
    z.looseObject({ type: z.literal('base64'), media_type: z.string(), data: z.string() }),
    z.looseObject({ type: z.literal('url'), url: z.string() }),
  ]),
});
const toolUseBlock = z.looseObject({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: z.unknown() });
const toolResultBlock = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string(),
  content: z.union([z.string(), z.array(z.union([textBlock, imageBlock]))]).optional(),
  is_error: z.boolean().optional(),
});
/** Thinking blocks an earlier answer returned: kept by Anthropic, dropped when translated (no other wire has them). */
const thinkingBlock = z.looseObject({ type: z.enum(['thinking', 'redacted_thinking']) });
const block = z.union([textBlock, imageBlock, toolUseBlock, toolResultBlock, thinkingBlock]);
type Block = z.infer<typeof block>;

/**
 * A turn; `system` messages (instructions given between turns, as Claude Code sends them) hold
 * only text (`refuseUntranslatable`).
 */
const messageSchema = z.looseObject({ role: z.enum(['user', 'assistant', 'system']), content: z.union([z.string(), z.array(block)]) });

const toolSchema = z.looseObject({ name: z.string().min(1), description: z.string().optional(), input_schema: z.record(z.string(), z.unknown()) });
const toolChoiceSchema = z.union([
  z.looseObject({ type: z.enum(['auto', 'any', 'none']), disable_parallel_tool_use: z.boolean().optional() }),
  z.looseObject({ type: z.literal('tool'), name: z.string(), disable_parallel_tool_use: z.boolean().optional() }),
]);

const thinkingDisplay = z.enum(['summarized', 'omitted']).nullish();

/** The Messages request (Anthropic's API reference), with the gateway's extension fields beside it. */
export const messagesRequestSchema = z.looseObject({
  model: modelName,
  max_tokens: z.number().int().min(1),
  messages: z.array(messageSchema).min(1),
  system: z.union([z.string(), z.array(textBlock)]).optional(),
  stop_sequences: z.array(z.string()).max(4).optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  metadata: z.looseObject({ user_id: z.string().max(256).optional() }).optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: toolChoiceSchema.optional(),
  thinking: z.union([
    z.looseObject({ type: z.literal('enabled'), budget_tokens: z.number().int().min(1), display: thinkingDisplay }),
    // The model decides whether and how much to think.
    z.looseObject({ type: z.literal('adaptive'), display: thinkingDisplay }),
    z.looseObject({ type: z.enum(['disabled', 'between_tools']) }),
  ]).optional(),
  output_config: z.looseObject({
    effort: z.enum(['low', 'medium', 'high', 'xhigh', 'max']).nullish(),
    format: z.looseObject({ type: z.literal('json_schema'), schema: z.record(z.string(), z.unknown()) }).nullish(),
  }).optional(),
  /** Anthropic's own editing of the context it keeps (a beta): nothing another wire could do with it. */
  context_management: z.looseObject({ edits: z.array(z.looseObject({ type: z.string() })).optional() }).nullish(),
  stream: z.boolean().optional(),
  // The gateway's own (spec 4.1 extension fields, as on chat completions).
  ...PROTOCOL_EXTENSION_FIELDS,
});
export type MessagesRequest = z.infer<typeof messagesRequestSchema>;

function textOfBlocks(content: string | Array<{ type: string; text?: string }> | undefined): string {
  if (content === undefined) return '';
  return typeof content === 'string' ? content : content.filter((b) => b.type === 'text').map((b) => b.text ?? '').join('');
}

function imagePart(b: Extract<Block, { type: 'image' }>): ContentPart {
  const source = b.source as { type: string; media_type?: string; data?: string; url?: string };
  const url = source.type === 'base64' ? `data:${source.media_type};base64,${source.data}` : source.url!;
  return { type: 'image_url', image_url: { url } };
}

/**
 * Messages' turns as the chat call's: system first, a `system` message where it stands, tool
 * results as `tool` messages, tool uses as tool calls.
 */
export function chatMessagesOf(request: Pick<MessagesRequest, 'system' | 'messages'>): ChatMessage[] {
  const out: ChatMessage[] = [];
  const system = typeof request.system === 'string' ? request.system : textOfBlocks(request.system);
  if (system) out.push({ role: 'system', content: system });
  for (const m of request.messages) {
    if (m.role === 'system') {
      const text = typeof m.content === 'string' ? m.content : textOfBlocks(m.content as Array<{ type: string; text?: string }>);
      if (text) out.push({ role: 'system', content: text });
      continue;
    }
    if (typeof m.content === 'string') {
      out.push({ role: m.role, content: m.content });
      continue;
    }
    const blocks = m.content as Block[];
    if (m.role === 'assistant') {
      const text = blocks.filter((b) => b.type === 'text').map((b) => (b as { text: string }).text).join('');
      const calls = blocks.filter((b): b is Extract<Block, { type: 'tool_use' }> => b.type === 'tool_use')
        .map((b) => ({ id: b.id, type: 'function' as const, function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }));
      out.push({ role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length && { tool_calls: calls }) });
      continue;
    }
    // A user turn: its tool results first (each a `tool` message, as chat orders them after the
    // assistant's calls), then what the user said.
    for (const b of blocks) {
      if (b.type !== 'tool_result') continue;
      const r = b as Extract<Block, { type: 'tool_result' }>;
      const text = typeof r.content === 'string' ? r.content : textOfBlocks(r.content as Array<{ type: string; text?: string }>);
      out.push({ role: 'tool', tool_call_id: r.tool_use_id, content: r.is_error ? `Error: ${text}` : text });
    }
    const parts: ContentPart[] = [];
    for (const b of blocks) {
      if (b.type === 'text') parts.push({ type: 'text', text: (b as { text: string }).text });
      else if (b.type === 'image') parts.push(imagePart(b as Extract<Block, { type: 'image' }>));
    }
    if (parts.length > 0) out.push({ role: 'user', content: parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('') : parts });
  }
  return out;
}

function chatToolChoice(choice: MessagesRequest['tool_choice']): ChatBody['tool_choice'] | undefined {
  if (!choice) return undefined;
  switch (choice.type) {
    case 'auto': return 'auto';
    case 'any': return 'required';
    case 'none': return 'none';
    default: return { type: 'function', function: { name: (choice as { name: string }).name } };
  }
}

/** What structured output is called on the chat wire (which names its schema; Messages does not). */
const OUTPUT_SCHEMA_NAME = 'output';

/**
 * The chat call's body for a Messages request: the same parameters under chat's names, for
 * every wire but Anthropic's (which takes the request as it came, `nativeBodyOf`). Thinking
 * blocks of earlier turns do not cross: no other wire has them. `output_config.format` is the
 * JSON-schema response format; `output_config.effort` the reasoning effort, sent only where the
 * serving model takes one (TRANSLATED_EFFORT: same words, the two vocabularies share them).
 */
export function chatBodyOf(request: MessagesRequest): ChatBody {
  const body: ChatBody = { model: request.model, messages: chatMessagesOf(request), max_tokens: request.max_tokens };
  if (request.stream) body.stream = true;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.top_p !== undefined) body.top_p = request.top_p;
  if (request.top_k !== undefined) body.top_k = request.top_k;
  if (request.stop_sequences?.length) body.stop = request.stop_sequences;
  if (request.metadata?.user_id) body.user = request.metadata.user_id;
  if (request.tools?.length) {
    body.tools = request.tools.map((t): ToolDefinition => ({ type: 'function', function: { name: t.name, ...(t.description && { description: t.description }), parameters: t.input_schema } }));
  }
  const choice = chatToolChoice(request.tool_choice);
  if (choice) body.tool_choice = choice;
  if (request.tool_choice?.disable_parallel_tool_use) body.parallel_tool_calls = false;
  const format = request.output_config?.format;
  if (format) body.response_format = { type: 'json_schema', json_schema: { name: OUTPUT_SCHEMA_NAME, schema: format.schema } };
  const effort = request.output_config?.effort;
  if (effort) {
    body.reasoning_effort = effort;
    body[TRANSLATED_EFFORT] = 'output_config.effort';
  }
  return body;
}

/** The fields the translation reads (`thinking` apart); any other a client sends reaches only Anthropic's own wire. */
const TRANSLATED_FIELDS: ReadonlySet<string> = new Set([
  'model', 'max_tokens', 'messages', 'system', 'stop_sequences', 'temperature', 'top_p', 'top_k', 'metadata', 'tools', 'tool_choice',
  'output_config', 'stream', 'thinking', ...PROTOCOL_EXTENSION_NAMES,
]);
/** The parts of `output_config` the translation carries. */
const TRANSLATED_OUTPUT_CONFIG: ReadonlySet<string> = new Set(['effort', 'format']);

/**
 * What only Anthropic's wire carries of a request: sent when an Anthropic connection serves it
 * as it came, named as dropped otherwise. Thinking of any kind (another wire's reasoning is its
 * model's own, not asked for this way), Anthropic's editing of its context, and every other field
 * the translation does not read (`mcp_servers`, `container`, `service_tier`, one added to the API
 * after this was written), so none is lost unnamed and none shares a cache key with a request
 * without it (the key is the translation).
 */
export function nativeOnlyFields(request: MessagesRequest): string[] {
  const fields: string[] = [];
  if (request.thinking && request.thinking.type !== 'disabled') fields.push('thinking');
  for (const k of Object.keys(request)) if (!TRANSLATED_FIELDS.has(k) && request[k] != null) fields.push(k);
  const outputConfig: Record<string, unknown> = request.output_config ?? {};
  for (const k of Object.keys(outputConfig)) if (!TRANSLATED_OUTPUT_CONFIG.has(k) && outputConfig[k] != null) fields.push(`output_config.${k}`);
  return fields;
}

/** The request as Anthropic takes it: the client's body without the gateway's own fields. */
export function nativeBodyOf(request: MessagesRequest): Record<string, unknown> {
  return withoutFields(request, PROTOCOL_EXTENSION_NAMES);
}

const STOP_REASONS: Record<FinishReason, string> = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use', content_filter: 'refusal' };

/** The gateway's charge beside a usage's counts (spec 2.2's `cost` and `price_source`). */
function costFields(extras: Pick<AnswerExtras, 'estimate'>): Record<string, unknown> {
  return extras.estimate ? { cost: extras.estimate.cost, price_source: extras.estimate.source } : { cost: null };
}

/** Messages' usage: its counts (input apart from what the cache read), and the gateway's cost beside them. */
function messagesUsage(usage: Usage | null, extras?: Pick<AnswerExtras, 'estimate'>): Record<string, unknown> {
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  const wire: Record<string, unknown> = {
    input_tokens: Math.max(0, (usage?.prompt_tokens ?? 0) - cached),
    output_tokens: usage?.completion_tokens ?? 0,
    cache_read_input_tokens: cached,
    cache_creation_input_tokens: 0,
  };
  if (extras) {
    wire.cost = extras.estimate?.cost ?? null;
    if (extras.estimate) wire.price_source = extras.estimate.source;
  }
  return wire;
}

function contentOf(choice: Choice | undefined): Array<Record<string, unknown>> {
  const content: Array<Record<string, unknown>> = [];
  const text = choice?.message.content;
  if (text) content.push({ type: 'text', text });
  for (const call of choice?.message.tool_calls ?? []) {
    let input: unknown = {};
    try {
      input = JSON.parse(call.function.arguments || '{}');
    } catch {
      input = {};
    }
    content.push({ type: 'tool_use', id: call.id, name: call.function.name, input });
  }
  if (content.length === 0) content.push({ type: 'text', text: '' });
  return content;
}

/** `msg_` and the request id: the answer's id, as Anthropic's are `msg_...`. */
const messageId = (call: ChatCall) => `msg_${call.ctx.state.requestId}`;

function gatewayFields(call: ChatCall, who: AnswerIdentity, extras?: AnswerExtras): Record<string, unknown> {
  const fields: Record<string, unknown> = { route: who.route, route_name: call.plan?.route?.slug ?? null, provider: who.provider, connection: who.connection };
  if (extras?.guardrails) fields.guardrails = extras.guardrails;
  if (extras?.cache) fields.cache = extras.cache;
  return fields;
}

/** One named SSE event, as Anthropic sends them (`event:` and `data:` with its `type`). */
function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify(Object.assign({ type }, data))}\n\n`;
}

/**
 * A provider's own event as SSE text. Its data may span lines (the SSE parser joined several
 * `data:` fields with newlines): each line is its own `data:` field again, so a line break
 * inside the data cannot end the field early or start a field of its own in the client's reader.
 */
function relayedEvent(e: NativeEvent): string {
  const data = e.data.includes('\n') || e.data.includes('\r') ? e.data.split(/\r\n|\r|\n/).join('\ndata: ') : e.data;
  return `event: ${e.event}\ndata: ${data}\n\n`;
}

/**
 * The Messages stream (Anthropic's streaming reference): `message_start`, then per content
 * block `content_block_start`, its deltas and `content_block_stop` (text, then each tool use
 * with `input_json_delta`), `message_delta` with the stop reason and usage, `message_stop`.
 * A `ping` follows the start, as Anthropic's does. A break ends with an `error` event.
 */
class MessagesStream implements StreamEncoder {
  private started = false;
  private open: { index: number; kind: 'text' | 'tool'; tool?: number } | null = null;
  private next = 0;
  private stopReason: string | null = null;
  /**
   * Set by the first of the provider's own events (a native request served by Anthropic): from
   * then on those are what the client gets, as sent (thinking blocks, signatures, citations),
   * and the translated deltas are only read by the gateway. `message_delta` is held to the end
   * so the gateway's cost joins its usage.
   */
  private native: { messageDelta: Record<string, unknown> | null } | null = null;

  constructor(private readonly call: ChatCall, private readonly who: AnswerIdentity) {}

  private passAlong(e: NativeEvent): string {
    this.native ??= { messageDelta: null };
    switch (e.event) {
      case 'message_start': {
        const data = JSON.parse(e.data) as { message?: Record<string, unknown> };
        this.started = true;
        return event('message_start', { message: Object.assign({}, data.message, { id: messageId(this.call) }, gatewayFields(this.call, this.who)) });
      }
      case 'message_delta':
        this.native.messageDelta = JSON.parse(e.data) as Record<string, unknown>;
        return '';
      // The end and a failure are the gateway's to say (complete, fail).
      case 'message_stop':
      case 'error':
        return '';
      default:
        return relayedEvent(e);
    }
  }

  private start(model: string): string {
    if (this.started) return '';
    this.started = true;
    const message = {
      id: messageId(this.call), type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 }, ...gatewayFields(this.call, this.who),
    };
    return event('message_start', { message }) + event('ping', {});
  }

  private close(): string {
    if (!this.open) return '';
    const text = event('content_block_stop', { index: this.open.index });
    this.open = null;
    return text;
  }

  chunk(model: string, choices: ChunkChoice[], _guardrails?: unknown, native?: NativeEvent): string {
    if (native) return this.passAlong(native);
    if (this.native) return '';
    let out = this.start(model);
    // One answer per Messages request: the first choice.
    const c = choices.find((x) => x.index === 0);
    if (!c) return out;
    if (c.delta.content) {
      if (this.open?.kind !== 'text') {
        out += this.close();
        this.open = { index: this.next++, kind: 'text' };
        out += event('content_block_start', { index: this.open.index, content_block: { type: 'text', text: '' } });
      }
      out += event('content_block_delta', { index: this.open.index, delta: { type: 'text_delta', text: c.delta.content } });
    }
    for (const t of c.delta.tool_calls ?? []) {
      if (this.open?.kind !== 'tool' || this.open.tool !== t.index) {
        out += this.close();
        this.open = { index: this.next++, kind: 'tool', tool: t.index };
        out += event('content_block_start', { index: this.open.index, content_block: { type: 'tool_use', id: t.id ?? '', name: t.function?.name ?? '', input: {} } });
      }
      if (t.function?.arguments) out += event('content_block_delta', { index: this.open.index, delta: { type: 'input_json_delta', partial_json: t.function.arguments } });
    }
    if (c.finish_reason) this.stopReason = STOP_REASONS[c.finish_reason] ?? 'end_turn';
    return out;
  }

  complete(model: string, extras: AnswerExtras): string {
    if (this.native?.messageDelta) {
      const delta = this.native.messageDelta;
      const usage = Object.assign({}, delta.usage as Record<string, unknown> | undefined, costFields(extras));
      return event('message_delta', Object.assign({}, delta, { usage }, gatewayFields(this.call, this.who, extras))) + event('message_stop', {});
    }
    const out = this.start(model) + this.close();
    return out
      + event('message_delta', { delta: { stop_reason: this.stopReason ?? 'end_turn', stop_sequence: null }, usage: messagesUsage(extras.usage, extras), ...gatewayFields(this.call, this.who, extras) })
      + event('message_stop', {});
  }

  fail(error: GatewayError): string {
    return event('error', anthropicErrorBody(error));
  }
}

export const anthropicMessagesWire: ChatWire = {
  endpoint: 'messages',
  whole: (call, who, choices, extras) => {
    // Served in Anthropic's own wire: its answer as it came, with the gateway's id, cost and fields.
    if (extras.native) {
      const usage = Object.assign({}, extras.native.usage as Record<string, unknown> | undefined, costFields(extras));
      return Object.assign({}, extras.native, { id: messageId(call), model: who.model, usage }, gatewayFields(call, who, extras));
    }
    const choice = choices.find((c) => c.index === 0) ?? choices[0];
    return {
      id: messageId(call),
      type: 'message',
      role: 'assistant',
      model: who.model,
      content: contentOf(choice),
      stop_reason: choice ? STOP_REASONS[choice.finish_reason] ?? 'end_turn' : 'end_turn',
      stop_sequence: null,
      usage: messagesUsage(extras.usage, extras),
      ...gatewayFields(call, who, extras),
    };
  },
  stream: (call, who) => new MessagesStream(call, who),
};

/** Anthropic's error types by HTTP status (their errors reference); the gateway's own code rides beside. */
function anthropicErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 402) return 'billing_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 408 || status === 504) return 'timeout_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

/**
 * An error in Anthropic's shape, `{"type":"error","error":{"type","message"}}`, keeping the
 * gateway's `code` (and any detail fields) inside `error`, so a client of either wire reads the
 * same code.
 */
export function anthropicErrorBody(err: GatewayError): { type: 'error'; error: Record<string, unknown> } {
  return { type: 'error', error: Object.assign({}, err.details, { type: anthropicErrorType(err.status), message: err.message, code: err.code, gateway_type: err.type }) };
}

/** Whether a path answers in Anthropic's shapes (errors included). */
export function isMessagesPath(path: string): boolean {
  return path === '/v1/messages' || path.startsWith('/v1/messages/');
}

/** Refuses what would change the answer's meaning if dropped. */
export function refuseUntranslatable(request: MessagesRequest): void {
  for (const m of request.messages) {
    if (typeof m.content === 'string') continue;
    for (const b of m.content as Block[]) {
      if (m.role === 'system' && b.type !== 'text') throw new GatewayError('invalid_request', '`system` messages hold only `text` blocks.');
      if (b.type === 'tool_result' && m.role !== 'user') throw new GatewayError('invalid_request', '`tool_result` blocks belong in a `user` message.');
      if (b.type === 'tool_use' && m.role !== 'assistant') throw new GatewayError('invalid_request', '`tool_use` blocks belong in an `assistant` message.');
    }
  }
}
