import { z } from 'zod';
import { GatewayError } from '../../../core/errors';
import type { ChatBody, ChatMessage, Choice, ChunkChoice, ContentPart, ToolDefinition, Usage } from '../../../core/providers/types';
import { modelName } from '../../validation';
import { PROTOCOL_EXTENSION_FIELDS, PROTOCOL_EXTENSION_NAMES, withoutFields } from '../chat-request';
import type { ChatCall } from '../chat-call';
import type { AnswerExtras, AnswerIdentity, ChatWire, StreamEncoder } from '../chat-wire';
import type { NativeEvent } from '../stream-answer';
import type { RequestGuard } from '../../../core/guardrails/request-guard';

/**
 * OpenAI's Responses API as a client protocol (`POST /v1/responses`): the request translated into
 * the chat call's body, the answer rendered as a response object and its semantic stream events.
 * Pure transforms; the route is api/gateway/responses.ts.
 */

/**
 * An object tagged by `type` (a tool, an input item, a content part): checked by its type's
 * schema where the translation reads that type (`untyped`: the schema of one without a type),
 * otherwise taken as it came as long as it names its type. The Responses API keeps adding tools
 * and items: OpenAI checks them when it serves the request as it came, and the translation names
 * those it cannot carry (`Untranslated`). A union would answer a malformed function tool with a
 * complaint about its `type`; this names the field at fault.
 */
function byType<B extends z.ZodObject>(base: B, schemas: Readonly<Record<string, z.ZodType>>, untyped?: string) {
  return base.superRefine((value, ctx) => {
    const type = (value as { type?: string }).type ?? untyped ?? '';
    // Own keys only: a `type` of `constructor` or `__proto__` must not find Object.prototype's.
    const schema = Object.hasOwn(schemas, type) ? schemas[type] : undefined;
    if (!schema) return;
    const checked = schema.safeParse(value);
    if (!checked.success) for (const issue of checked.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  });
}
const tagged = z.looseObject({ type: z.string().min(1) });

const textPart = z.looseObject({ type: z.string(), text: z.string() });
const contentPart = byType(tagged, { input_text: textPart, output_text: textPart, input_image: z.looseObject({ type: z.string(), image_url: z.string().nullish(), detail: z.string().nullish() }) })
  .meta({ description: 'A content part: `input_text`, `output_text`, `input_image` and whatever else the Responses API takes.' });
const inputContent = z.union([z.string(), z.array(contentPart)]);
const messageItem = z.looseObject({ type: z.literal('message').optional(), role: z.enum(['user', 'system', 'developer', 'assistant']), content: inputContent });
const functionCallItem = z.looseObject({ type: z.literal('function_call'), call_id: z.string(), name: z.string(), arguments: z.string() });
const functionOutputItem = z.looseObject({ type: z.literal('function_call_output'), call_id: z.string(), output: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]) });
/** An input item; one without a type is a message. */
const inputItem = byType(z.looseObject({ type: z.string().min(1).optional() }), { message: messageItem, function_call: functionCallItem, function_call_output: functionOutputItem }, 'message')
  .meta({ description: 'An input item: a message (with or without `type`), `function_call`, `function_call_output`, `reasoning`, and every other item the Responses API takes.' });

const functionTool = z.looseObject({ type: z.literal('function'), name: z.string().min(1), description: z.string().nullish(), parameters: z.record(z.string(), z.unknown()).nullish(), strict: z.boolean().nullish() });
type FunctionTool = z.infer<typeof functionTool>;
const tool = byType(tagged, { function: functionTool })
  .meta({ description: 'A tool: `function`, and the Responses API\'s others (`web_search`, `namespace`, `custom`, `mcp`, ...), which only OpenAI\'s own wire carries.' });
const toolChoice = z.union([z.enum(['auto', 'none', 'required']), byType(tagged, { function: z.looseObject({ type: z.literal('function'), name: z.string() }) })]);

/**
 * The Responses request (OpenAI's API reference), with the gateway's extension fields beside it.
 * Only what the translation reads is checked here; the rest is OpenAI's to check when it serves
 * the request as it came, and is named as not carried when another wire does.
 */
export const responsesRequestSchema = z.looseObject({
  model: modelName,
  input: z.union([z.string(), z.array(inputItem)]),
  instructions: z.string().nullish(),
  tools: z.array(tool).optional(),
  tool_choice: toolChoice.optional(),
  parallel_tool_calls: z.boolean().nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  max_output_tokens: z.number().int().min(1).nullish(),
  text: z.looseObject({
    format: z.union([
      z.looseObject({ type: z.literal('text') }),
      z.looseObject({ type: z.literal('json_object') }),
      z.looseObject({ type: z.literal('json_schema'), name: z.string(), schema: z.record(z.string(), z.unknown()), strict: z.boolean().nullish(), description: z.string().optional() }),
    ]).optional(),
  }).optional(),
  // Only OpenAI's own wire reads it (`nativeOnlyFields`); the efforts it takes keep growing.
  reasoning: z.looseObject({ effort: z.string().nullish() }).nullish(),
  user: z.string().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  stream: z.boolean().optional(),
  store: z.boolean().optional(),
  previous_response_id: z.string().nullish(),
  // The gateway's own (spec 4.1 extension fields, as on chat completions).
  ...PROTOCOL_EXTENSION_FIELDS,
});
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

/**
 * What of a request the translation could not carry to a chat wire, named as X-GW-Params-Dropped
 * names it when another wire than OpenAI's own serves: `tools:<type>` for a tool it cannot offer
 * (a built-in tool, a `namespace`, a `custom` one), `input:<type>` for an input item or content
 * part it cannot send (a built-in tool's call, a file), `tool_choice` for a choice of one of those,
 * `text.<setting>` for a text setting besides the format (`verbosity`).
 */
export type Untranslated = Set<string>;

type Part = { type: string; text?: string; image_url?: string | null; detail?: string | null };

function contentOf(content: string | Part[], untranslated?: Untranslated): ChatMessage['content'] {
  if (typeof content === 'string') return content;
  const parts: ContentPart[] = [];
  for (const p of content) {
    if (p.type === 'input_text' || p.type === 'output_text') parts.push({ type: 'text', text: p.text! });
    else if (p.type === 'input_image' && p.image_url) parts.push({ type: 'image_url', image_url: { url: p.image_url, ...(p.detail && { detail: p.detail }) } });
    else untranslated?.add(`input:${p.type}`);
  }
  return parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('') : parts;
}

/** Input items that do not cross and are not named: reasoning is the model's own (only OpenAI reads it back), a reference only OpenAI resolves. */
const UNSENT_ITEMS: ReadonlySet<string> = new Set(['reasoning', 'item_reference']);

/**
 * The input items as the chat call's messages: instructions first, `developer` messages as system
 * ones (every chat wire takes those), function calls and their outputs as tool calls and tool
 * messages. `origins`, when given, is filled with the index of the message each input item became
 * (-1 for an item that does not cross), for `asLogged`; `untranslated` gathers what did not cross.
 */
export function chatMessagesOf(request: Pick<ResponsesRequest, 'instructions' | 'input'>, origins?: number[], untranslated?: Untranslated): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (request.instructions) out.push({ role: 'system', content: request.instructions });
  if (typeof request.input === 'string') {
    origins?.push(out.length);
    out.push({ role: 'user', content: request.input });
    return out;
  }
  for (const item of request.input as Array<Record<string, unknown>>) {
    const type = (item.type as string | undefined) ?? 'message';
    if (type === 'function_call') {
      const call = { id: String(item.call_id), type: 'function' as const, function: { name: String(item.name), arguments: String(item.arguments) } };
      const last = out.at(-1);
      // Calls of one turn belong to one assistant message.
      if (last?.role === 'assistant' && last.tool_calls && !last.content) last.tool_calls.push(call);
      else out.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (type === 'function_call_output') {
      const output = typeof item.output === 'string' ? item.output : JSON.stringify(item.output);
      out.push({ role: 'tool', tool_call_id: String(item.call_id), content: output });
    } else if (type === 'message') {
      const role = item.role === 'developer' ? 'system' : item.role as ChatMessage['role'];
      out.push({ role, content: contentOf(item.content as string | Part[], untranslated) });
    } else {
      if (!UNSENT_ITEMS.has(type)) untranslated?.add(`input:${type}`);
      origins?.push(-1);
      continue;
    }
    origins?.push(out.length - 1);
  }
  return out;
}

/** The chat call's body for a Responses request: the same parameters under chat's names (`origins`, `untranslated`: chatMessagesOf's). */
export function chatBodyOf(request: ResponsesRequest, origins?: number[], untranslated?: Untranslated): ChatBody {
  const body: ChatBody = { model: request.model, messages: chatMessagesOf(request, origins, untranslated) };
  if (request.stream) body.stream = true;
  if (typeof request.temperature === 'number') body.temperature = request.temperature;
  if (typeof request.top_p === 'number') body.top_p = request.top_p;
  if (typeof request.max_output_tokens === 'number') body.max_tokens = request.max_output_tokens;
  if (request.user) body.user = request.user;
  const tools: ToolDefinition[] = [];
  for (const t of request.tools ?? []) {
    if (t.type !== 'function') {
      untranslated?.add(`tools:${t.type}`);
      continue;
    }
    const f = t as FunctionTool;
    tools.push({ type: 'function', function: { name: f.name, ...(f.description && { description: f.description }), ...(f.parameters && { parameters: f.parameters }), ...(typeof f.strict === 'boolean' && { strict: f.strict }) } });
  }
  if (tools.length > 0) body.tools = tools;
  // Where tools were offered and none crossed, the tool settings mean nothing to the chat wire
  // (and OpenAI's Chat Completions refuses them without tools).
  const noneCrossed = tools.length === 0 && (request.tools?.length ?? 0) > 0;
  const choice = request.tool_choice;
  if (choice !== undefined) {
    const carried = typeof choice === 'string' ? choice : choice.type === 'function' ? { type: 'function' as const, function: { name: String(choice.name) } } : null;
    if (carried && !noneCrossed) body.tool_choice = carried;
    else if (choice !== 'auto' && choice !== 'none') untranslated?.add('tool_choice');
  }
  if (typeof request.parallel_tool_calls === 'boolean' && !noneCrossed) body.parallel_tool_calls = request.parallel_tool_calls;
  const format = request.text?.format;
  if (format?.type === 'json_schema') {
    const f = format as { name: string; schema: Record<string, unknown>; strict?: boolean | null };
    body.response_format = { type: 'json_schema', json_schema: { name: f.name, schema: f.schema, ...(typeof f.strict === 'boolean' && { strict: f.strict }) } };
  } else if (format?.type === 'json_object') {
    body.response_format = { type: 'json_object' };
  }
  // `text`'s other settings (`verbosity`) have no chat equivalent.
  for (const k in request.text) if (k !== 'format' && request.text[k] != null) untranslated?.add(`text.${k}`);
  return body;
}

/** The fields the translation reads; any other a client sends reaches only OpenAI's own wire. */
const TRANSLATED_FIELDS: ReadonlySet<string> = new Set([
  'model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'temperature', 'top_p', 'max_output_tokens',
  'text', 'user', 'metadata', 'stream', 'store', 'previous_response_id', ...PROTOCOL_EXTENSION_NAMES,
]);

/**
 * What only OpenAI's own Responses wire carries of a request (`reasoning`, `include`,
 * `truncation`, ...): sent when OpenAI serves it as it came, named as dropped otherwise.
 * `reasoning` has no equivalent every other wire takes (Anthropic's thinking budget is another
 * thing, and Chat Completions' `reasoning_effort` is refused by the models that do not reason).
 */
export function nativeOnlyFields(request: ResponsesRequest): string[] {
  return Object.keys(request).filter((k) => !TRANSLATED_FIELDS.has(k) && request[k] != null);
}

/**
 * The request as OpenAI's `/responses` takes it: the client's body without the gateway's own
 * fields, with the conversation expanded in `input` (the gateway keeps responses, so
 * `previous_response_id` is its to resolve). Earlier reasoning items OpenAI could only read back
 * by id (it is never asked to keep them) are left out unless they carry their encrypted content.
 */
export function nativeBodyOf(request: ResponsesRequest, input: Array<Record<string, unknown>>): Record<string, unknown> {
  const body = withoutFields(request, NOT_NATIVE);
  body.input = input.filter((item) => item.type !== 'reasoning' || typeof item.encrypted_content === 'string');
  return body;
}
const NOT_NATIVE: ReadonlySet<string> = new Set([...PROTOCOL_EXTENSION_NAMES, 'previous_response_id', 'store']);

/** `resp_` and the request id: the response's id. */
const responseId = (call: ChatCall) => `resp_${call.ctx.state.requestId}`;
const messageItemId = (call: ChatCall) => `msg_${call.ctx.state.requestId}`;
const callItemId = (call: ChatCall, i: number) => `fc_${call.ctx.state.requestId}_${i}`;

/** Responses' usage: its counts under its names, and the gateway's cost beside them. */
function responsesUsage(usage: Usage | null, extras: Pick<AnswerExtras, 'estimate'>): Record<string, unknown> {
  const input = usage?.prompt_tokens ?? 0;
  const output = usage?.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: usage?.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: usage?.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage?.total_tokens ?? input + output,
    cost: extras.estimate?.cost ?? null,
    ...(extras.estimate && { price_source: extras.estimate.source }),
  };
}

type OutputItem = Record<string, unknown>;

function outputOf(call: ChatCall, choice: Choice | undefined): OutputItem[] {
  const output: OutputItem[] = [];
  const text = choice?.message.content;
  if (text) output.push({ type: 'message', id: messageItemId(call), status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] });
  (choice?.message.tool_calls ?? []).forEach((c, i) => {
    output.push({ type: 'function_call', id: callItemId(call, i), call_id: c.id, name: c.function.name, arguments: c.function.arguments, status: 'completed' });
  });
  return output;
}

/**
 * Keeps a finished response for `previous_response_id` (api/gateway/responses.ts), given the
 * request's guardrails (what they matched is not kept: `asLogged`); answers whether it was kept.
 * Never rejects: a response that could not be kept says `store: false`.
 */
export type KeepResponse = (response: Record<string, unknown>, guard: RequestGuard | undefined) => Promise<boolean>;

/** How a turn's input became the chat call's messages: `chatBodyOf`'s messages and origins, and where this turn's own items start. */
export type Translation = { messages: readonly ChatMessage[]; origins: readonly number[]; from: number };

/** An input message's content with the request log's copy of its text (`contentOf` in reverse: text parts joined are one part). */
function loggedContent(content: string | Part[], logged: ChatMessage['content']): string | Part[] {
  if (typeof content === 'string' || typeof logged === 'string') {
    const text = typeof logged === 'string' ? logged : '';
    return typeof content === 'string' ? text : [{ type: content.find((p) => p.type === 'output_text') ? 'output_text' : 'input_text', text }];
  }
  const parts = logged ?? [];
  return content.map((p, i) => (parts[i]?.type === 'text' ? Object.assign({}, p, { text: parts[i].text }) : p));
}

/**
 * A turn as the request log keeps it (issue 52): every guardrail match redacted, whatever its
 * rule's action, so text a rule only flagged is not kept either. The guardrails' own log copies
 * are carried back: of the messages (`RequestGuard.logMessages`, where a message differs) onto
 * this turn's input items and the echoed `instructions`, and of the answer
 * (`RequestGuard.logAnswer`) onto the response's output text. A guarded request is always
 * translated, so the response's output is the translation's (`outputOf`). Copies; the client's
 * response is not changed.
 */
export function asLogged(input: ReadonlyArray<Record<string, unknown>>, response: Record<string, unknown>, translation: Translation, guard: Pick<RequestGuard, 'logMessages' | 'logAnswer'>): { input: Array<Record<string, unknown>>; response: Record<string, unknown> } {
  const logged = guard.logMessages;
  const changed = (index: number) => (logged && index >= 0 && logged[index] !== translation.messages[index] ? logged[index]! : null);
  const keptInput = input.map((item, i) => {
    const message = changed(translation.origins[translation.from + i] ?? -1);
    if (!message) return item;
    if (item.type === 'function_call_output') return Object.assign({}, item, { output: typeof message.content === 'string' ? message.content : '' });
    if (item.type === 'function_call') return item;
    return Object.assign({}, item, { content: loggedContent(item.content as string | Part[], message.content) });
  });
  const kept = Object.assign({}, response);
  // Instructions are the first message, the system one.
  const instructions = typeof response.instructions === 'string' && response.instructions ? changed(0) : null;
  if (instructions) kept.instructions = typeof instructions.content === 'string' ? instructions.content : '';
  const answer = guard.logAnswer?.[0];
  if (answer !== undefined && Array.isArray(response.output)) {
    kept.output = (response.output as OutputItem[]).map((item) => (item.type === 'message' && Array.isArray(item.content)
      ? Object.assign({}, item, { content: (item.content as Part[]).map((p) => (p.type === 'output_text' ? Object.assign({}, p, { text: answer }) : p)) })
      : item));
  }
  return { input: keptInput, response: kept };
}

/** The request's own settings a response object repeats (OpenAI's reference). */
export type ResponseEcho = Pick<ResponsesRequest, 'instructions' | 'tools' | 'tool_choice' | 'temperature' | 'top_p' | 'max_output_tokens' | 'text' | 'metadata' | 'store' | 'previous_response_id' | 'parallel_tool_calls' | 'user'>;

/** The response object (without its output and usage), as `response.created` and the whole answer carry it. */
function responseObject(call: ChatCall, who: AnswerIdentity, echo: ResponseEcho, status: 'in_progress' | 'completed' | 'incomplete'): Record<string, unknown> {
  return {
    id: responseId(call),
    object: 'response',
    created_at: Math.floor(call.createdAt.getTime() / 1000),
    status,
    error: null,
    incomplete_details: null,
    instructions: echo.instructions ?? null,
    max_output_tokens: echo.max_output_tokens ?? null,
    model: who.model,
    output: [],
    parallel_tool_calls: echo.parallel_tool_calls ?? true,
    previous_response_id: echo.previous_response_id ?? null,
    store: echo.store ?? false,
    temperature: echo.temperature ?? null,
    text: echo.text ?? { format: { type: 'text' } },
    tool_choice: echo.tool_choice ?? 'auto',
    tools: echo.tools ?? [],
    top_p: echo.top_p ?? null,
    usage: null,
    user: echo.user ?? null,
    metadata: echo.metadata ?? {},
    route: who.route,
    route_name: call.plan?.route?.slug ?? null,
    provider: who.provider,
    connection: who.connection,
  };
}

/**
 * OpenAI's own response object (a request it served as it came) as the client gets it: the
 * gateway's id, `store` and `previous_response_id` (the gateway keeps responses, not OpenAI), the
 * gateway's cost beside the usage, and the serving identity.
 */
function asServedNatively(native: Record<string, unknown>, call: ChatCall, who: AnswerIdentity, echo: ResponseEcho, extras?: AnswerExtras): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    id: responseId(call), store: echo.store ?? false, previous_response_id: echo.previous_response_id ?? null,
    route: who.route, route_name: call.plan?.route?.slug ?? null, provider: who.provider, connection: who.connection,
  };
  if (extras) {
    fields.usage = Object.assign({}, native.usage as Record<string, unknown> | undefined, { cost: extras.estimate?.cost ?? null, ...(extras.estimate && { price_source: extras.estimate.source }) });
    Object.assign(fields, extraFields(extras));
  }
  return Object.assign({}, native, fields);
}

function finishFields(finish: Choice['finish_reason'] | null): Record<string, unknown> {
  return finish === 'length' ? { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } : finish === 'content_filter' ? { status: 'incomplete', incomplete_details: { reason: 'content_filter' } } : { status: 'completed' };
}

function extraFields(extras: AnswerExtras): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (extras.guardrails) fields.guardrails = extras.guardrails;
  if (extras.cache) fields.cache = extras.cache;
  return fields;
}

/**
 * The Responses stream (OpenAI's streaming reference): `response.created`, `response.in_progress`,
 * then per output item `response.output_item.added`, its parts and deltas
 * (`response.output_text.delta`, `response.function_call_arguments.delta`) and their `.done`
 * events, `response.output_item.done`, and `response.completed` with the whole response. Every
 * event carries its `sequence_number`. A break ends with an `error` event.
 */
class ResponsesStream implements StreamEncoder {
  private seq = 0;
  private started = false;
  private readonly items: OutputItem[] = [];
  private open: { index: number; kind: 'text'; text: string } | { index: number; kind: 'tool'; tool: number; item: OutputItem } | null = null;
  private finish: Choice['finish_reason'] | null = null;
  /**
   * Set by the first of OpenAI's own events (a request it served as it came): from then on those
   * are what the client gets (reasoning items, annotations, built-in tools' items), renumbered,
   * with the gateway's id on the response; the translated deltas are only read by the gateway.
   * The final `response.completed` (or `.incomplete`) is held so the gateway's cost joins it.
   */
  private native: { end: { type: string; response: Record<string, unknown> } | null } | null = null;

  constructor(private readonly call: ChatCall, private readonly who: AnswerIdentity, private readonly echo: ResponseEcho, private readonly keep?: KeepResponse) {}

  private passAlong(e: NativeEvent): string {
    this.native ??= { end: null };
    const { type, sequence_number: _theirs, ...data } = JSON.parse(e.data) as Record<string, unknown> & { type: string; response?: Record<string, unknown> };
    switch (type) {
      case 'response.created':
      case 'response.in_progress':
        this.started = true;
        return this.event(type, { ...data, response: asServedNatively(data.response ?? {}, this.call, this.who, this.echo) });
      case 'response.completed':
      case 'response.incomplete':
        this.native.end = { type, response: data.response ?? {} };
        return '';
      // A failure is the gateway's to say (fail).
      case 'response.failed':
      case 'error':
        return '';
      default:
        return this.event(type, data);
    }
  }

  private event(type: string, data: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify(Object.assign({ type, sequence_number: this.seq++ }, data))}\n\n`;
  }

  private start(model: string): string {
    if (this.started) return '';
    this.started = true;
    const response = responseObject(this.call, { ...this.who, model }, this.echo, 'in_progress');
    return this.event('response.created', { response }) + this.event('response.in_progress', { response });
  }

  private close(): string {
    const open = this.open;
    if (!open) return '';
    this.open = null;
    if (open.kind === 'text') {
      const part = { type: 'output_text', text: open.text, annotations: [] };
      const item = { type: 'message', id: messageItemId(this.call), status: 'completed', role: 'assistant', content: [part] };
      this.items[open.index] = item;
      const at = { item_id: item.id, output_index: open.index, content_index: 0 };
      return this.event('response.output_text.done', { ...at, text: open.text })
        + this.event('response.content_part.done', { ...at, part })
        + this.event('response.output_item.done', { output_index: open.index, item });
    }
    const item = Object.assign(open.item, { status: 'completed' });
    this.items[open.index] = item;
    return this.event('response.function_call_arguments.done', { item_id: item.id, output_index: open.index, arguments: item.arguments })
      + this.event('response.output_item.done', { output_index: open.index, item });
  }

  chunk(model: string, choices: ChunkChoice[], _guardrails?: unknown, native?: NativeEvent): string {
    if (native) return this.passAlong(native);
    if (this.native) return '';
    let out = this.start(model);
    const c = choices.find((x) => x.index === 0);
    if (!c) return out;
    if (c.delta.content) {
      if (this.open?.kind !== 'text') {
        out += this.close();
        const index = this.items.length;
        this.open = { index, kind: 'text', text: '' };
        this.items.push({});
        const id = messageItemId(this.call);
        out += this.event('response.output_item.added', { output_index: index, item: { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] } })
          + this.event('response.content_part.added', { item_id: id, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
      }
      const open = this.open as { index: number; kind: 'text'; text: string };
      open.text += c.delta.content;
      out += this.event('response.output_text.delta', { item_id: messageItemId(this.call), output_index: open.index, content_index: 0, delta: c.delta.content });
    }
    for (const t of c.delta.tool_calls ?? []) {
      if (this.open?.kind !== 'tool' || this.open.tool !== t.index) {
        out += this.close();
        const index = this.items.length;
        const item: OutputItem = { type: 'function_call', id: callItemId(this.call, t.index), call_id: t.id ?? '', name: t.function?.name ?? '', arguments: '', status: 'in_progress' };
        this.open = { index, kind: 'tool', tool: t.index, item };
        this.items.push(item);
        out += this.event('response.output_item.added', { output_index: index, item: { ...item } });
      }
      const open = this.open as { index: number; item: OutputItem };
      const delta = t.function?.arguments ?? '';
      if (delta) {
        open.item.arguments = String(open.item.arguments) + delta;
        out += this.event('response.function_call_arguments.delta', { item_id: open.item.id, output_index: open.index, delta });
      }
    }
    if (c.finish_reason) this.finish = c.finish_reason;
    return out;
  }

  complete(model: string, extras: AnswerExtras): string | Promise<string> {
    const held = this.native?.end;
    const out = held ? '' : this.start(model) + this.close();
    const response = held ? asServedNatively(held.response, this.call, this.who, this.echo, extras) : Object.assign(responseObject(this.call, { ...this.who, model }, this.echo, 'completed'), finishFields(this.finish), {
      output: this.items, usage: responsesUsage(extras.usage, extras),
    }, extraFields(extras));
    const end = () => out + this.event(held?.type ?? (response.status === 'completed' ? 'response.completed' : 'response.incomplete'), { response });
    // Kept before the client reads the end, so a continuation sent on `response.completed` finds it.
    if (!this.keep) return end();
    return this.keep(response, this.call.guard).then((kept) => {
      if (!kept) response.store = false;
      return end();
    });
  }

  fail(error: GatewayError): string {
    return this.event('error', { code: error.code ?? error.type, message: error.message, param: null });
  }
}

/**
 * The Responses wire for one request (its settings are echoed in the response object). `keep`
 * stores a streamed response as it ends; a whole one is kept by the route once answered.
 */
export function openAIResponsesWire(echo: ResponseEcho, keep?: KeepResponse): ChatWire {
  return {
    endpoint: 'responses',
    whole: (call, who, choices, extras) => {
      // Served in OpenAI's own wire: its response as it came, with the gateway's id, cost and fields.
      if (extras.native) return asServedNatively(extras.native, call, who, echo, extras);
      const choice = choices.find((c) => c.index === 0) ?? choices[0];
      return Object.assign(responseObject(call, who, echo, 'completed'), finishFields(choice?.finish_reason ?? null), {
        output: outputOf(call, choice), usage: responsesUsage(extras.usage, extras),
      }, extraFields(extras));
    },
    stream: (call, who) => new ResponsesStream(call, who, echo, keep),
  };
}
