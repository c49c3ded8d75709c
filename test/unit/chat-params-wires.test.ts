import { CHAT_PARAMETERS } from '../../api/gateway/chat-params';
import { loadModelCatalog, type ModelCatalog } from '../../core/catalog/model-catalog';
import { DROPPABLE_PARAMS, prepareBody } from '../../core/chat/prepare';
import { ADAPTERS } from '../../core/providers/adapters';
import type { ProviderKind } from '../../core/providers/kinds';
import type { ChatBody, ParamRefusal, UpstreamRequest } from '../../core/providers/types';

/**
 * Issue 12 section 3, "no parameter lost silently": every parameter of the spec 4.1 chat
 * request on every wire is either sent in the wire's own form, dropped and named (the nine
 * sampling parameters only), or refused with a message naming it. Fixtures, no network.
 */

type Outcome = { refused: ParamRefusal } | { dropped: string[]; req: UpstreamRequest };
type Expect = 'dropped' | 'refused' | ((req: UpstreamRequest) => void);
type WireName = 'openai' | 'azure_openai' | 'compatible' | 'anthropic' | 'google';

const COMPATIBLE: ProviderKind[] = ['mistral', 'groq', 'deepseek', 'xai', 'together', 'fireworks', 'cerebras', 'perplexity', 'openrouter', 'custom'];
const MODELS: Record<WireName, string> = { openai: 'gpt-4o-mini', azure_openai: 'my-deployment', compatible: 'some-model', anthropic: 'claude-3-5-haiku-latest', google: 'gemini-2.0-flash' };
const hello = [{ role: 'user' as const, content: 'hi' }];
const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };

let catalog: ModelCatalog;
beforeAll(async () => {
  catalog = await loadModelCatalog();
});

function through(kind: ProviderKind, model: string, extra: Record<string, unknown>, stream = false): Outcome {
  const adapter = ADAPTERS[kind];
  const prepared = prepareBody({ model: 'client-name', messages: hello, ...extra } as ChatBody, kind, model, adapter, catalog, new Set());
  const refused = adapter.refusal(prepared.body, model);
  if (refused) return { refused };
  return { dropped: prepared.dropped, req: adapter.buildRequest(prepared.body, { model, stream, defaultMaxTokens: 4096, config: {} }) };
}

const body = (req: UpstreamRequest) => req.body as Record<string, unknown>;
const config = (req: UpstreamRequest) => body(req).generationConfig as Record<string, unknown>;
/** On the OpenAI wire a parameter is sent as it came. */
const asSent = (name: string, value: unknown) => (req: UpstreamRequest) => expect(body(req)[name]).toEqual(value);
const openAiWire = (name: string, value: unknown, overrides: Partial<Record<'openai' | 'azure_openai' | 'compatible', Expect>> = {}) =>
  ({ openai: asSent(name, value), azure_openai: asSent(name, value), compatible: asSent(name, value), ...overrides });

/** One row per parameter: the request fields that carry it and what each wire does with them. */
const CASES: Array<{ param: string; extra: Record<string, unknown>; expect: Record<WireName, Expect> }> = [
  { param: 'model', extra: {}, expect: {
    ...openAiWire('model', 'x'),
    openai: (req) => expect(body(req).model).toBe('gpt-4o-mini'),
    azure_openai: (req) => expect(req.path).toBe('/deployments/my-deployment/chat/completions'),
    compatible: (req) => expect(body(req).model).toBe('some-model'),
    anthropic: (req) => expect(body(req).model).toBe('claude-3-5-haiku-latest'),
    google: (req) => expect(req.path).toBe('/models/gemini-2.0-flash:generateContent'),
  } },
  { param: 'messages', extra: { messages: [{ role: 'system', content: 'Be brief.' }, ...hello] }, expect: {
    ...openAiWire('messages', [{ role: 'system', content: 'Be brief.' }, ...hello]),
    anthropic: (req) => expect(body(req)).toMatchObject({ system: 'Be brief.', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] }),
    google: (req) => expect(body(req)).toMatchObject({ systemInstruction: { parts: [{ text: 'Be brief.' }] }, contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
  } },
  { param: 'stream', extra: { stream: true }, expect: {
    ...openAiWire('stream', true),
    anthropic: (req) => expect(body(req).stream).toBe(true),
    google: (req) => expect(req).toMatchObject({ path: '/models/gemini-2.0-flash:streamGenerateContent', query: { alt: 'sse' } }),
  } },
  { param: 'stream_options', extra: { stream: true, stream_options: { include_usage: true } }, expect: {
    ...openAiWire('stream_options', { include_usage: true }),
    // Usage always arrives on these wires (message_delta, usageMetadata); the gateway adds the chunk.
    anthropic: (req) => expect(body(req)).not.toHaveProperty('stream_options'),
    google: (req) => expect(body(req)).not.toHaveProperty('stream_options'),
  } },
  { param: 'max_tokens', extra: { max_tokens: 77 }, expect: {
    ...openAiWire('max_tokens', 77),
    anthropic: (req) => expect(body(req).max_tokens).toBe(77),
    google: (req) => expect(config(req).maxOutputTokens).toBe(77),
  } },
  { param: 'max_completion_tokens', extra: { max_completion_tokens: 66 }, expect: {
    ...openAiWire('max_completion_tokens', 66),
    anthropic: (req) => expect(body(req).max_tokens).toBe(66),
    google: (req) => expect(config(req).maxOutputTokens).toBe(66),
  } },
  { param: 'temperature', extra: { temperature: 0.4 }, expect: {
    ...openAiWire('temperature', 0.4),
    anthropic: (req) => expect(body(req).temperature).toBe(0.4),
    google: (req) => expect(config(req).temperature).toBe(0.4),
  } },
  { param: 'top_p', extra: { top_p: 0.9 }, expect: {
    ...openAiWire('top_p', 0.9),
    anthropic: (req) => expect(body(req).top_p).toBe(0.9),
    google: (req) => expect(config(req).topP).toBe(0.9),
  } },
  { param: 'top_k', extra: { top_k: 40 }, expect: {
    ...openAiWire('top_k', 40, { openai: 'dropped', azure_openai: 'dropped' }),
    anthropic: (req) => expect(body(req).top_k).toBe(40),
    google: (req) => expect(config(req).topK).toBe(40),
  } },
  { param: 'stop', extra: { stop: ['END', 'STOP'] }, expect: {
    ...openAiWire('stop', ['END', 'STOP']),
    anthropic: (req) => expect(body(req).stop_sequences).toEqual(['END', 'STOP']),
    google: (req) => expect(config(req).stopSequences).toEqual(['END', 'STOP']),
  } },
  { param: 'frequency_penalty', extra: { frequency_penalty: 0.5 }, expect: {
    ...openAiWire('frequency_penalty', 0.5),
    anthropic: 'dropped',
    google: (req) => expect(config(req).frequencyPenalty).toBe(0.5),
  } },
  { param: 'presence_penalty', extra: { presence_penalty: -0.5 }, expect: {
    ...openAiWire('presence_penalty', -0.5),
    anthropic: 'dropped',
    google: (req) => expect(config(req).presencePenalty).toBe(-0.5),
  } },
  { param: 'tools', extra: { tools }, expect: {
    ...openAiWire('tools', tools),
    anthropic: (req) => expect(body(req).tools).toEqual([{ name: 'get_weather', description: 'Weather', input_schema: tools[0]!.function.parameters }]),
    google: (req) => expect(body(req).tools).toEqual([{ functionDeclarations: [{ name: 'get_weather', description: 'Weather', parameters: tools[0]!.function.parameters }] }]),
  } },
  { param: 'tool_choice', extra: { tools, tool_choice: { type: 'function', function: { name: 'get_weather' } } }, expect: {
    ...openAiWire('tool_choice', { type: 'function', function: { name: 'get_weather' } }),
    anthropic: (req) => expect(body(req).tool_choice).toEqual({ type: 'tool', name: 'get_weather' }),
    google: (req) => expect(body(req).toolConfig).toEqual({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } }),
  } },
  { param: 'parallel_tool_calls', extra: { tools, parallel_tool_calls: false }, expect: {
    ...openAiWire('parallel_tool_calls', false),
    anthropic: (req) => expect(body(req).tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true }),
    google: 'refused',
  } },
  { param: 'response_format', extra: { response_format: { type: 'json_schema', json_schema: { name: 'weather', schema, strict: true } } }, expect: {
    ...openAiWire('response_format', { type: 'json_schema', json_schema: { name: 'weather', schema, strict: true } }),
    anthropic: (req) => expect(body(req).output_config).toEqual({ format: { type: 'json_schema', schema } }),
    google: (req) => expect(config(req)).toMatchObject({ responseMimeType: 'application/json', responseJsonSchema: schema }),
  } },
  { param: 'n', extra: { n: 3 }, expect: {
    ...openAiWire('n', 3),
    anthropic: 'refused',
    google: (req) => expect(config(req).candidateCount).toBe(3),
  } },
  { param: 'seed', extra: { seed: 42 }, expect: {
    ...openAiWire('seed', 42),
    anthropic: 'dropped',
    google: (req) => expect(config(req).seed).toBe(42),
  } },
  { param: 'logprobs', extra: { logprobs: true }, expect: { ...openAiWire('logprobs', true), anthropic: 'dropped', google: 'dropped' } },
  { param: 'top_logprobs', extra: { logprobs: true, top_logprobs: 3 }, expect: { ...openAiWire('top_logprobs', 3), anthropic: 'dropped', google: 'dropped' } },
  { param: 'logit_bias', extra: { logit_bias: { 50256: -100 } }, expect: { ...openAiWire('logit_bias', { 50256: -100 }), anthropic: 'dropped', google: 'dropped' } },
  { param: 'user', extra: { user: 'end-user-7' }, expect: {
    ...openAiWire('user', 'end-user-7'),
    anthropic: (req) => expect(body(req).metadata).toEqual({ user_id: 'end-user-7' }),
    google: 'refused',
  } },
];

const WIRES: Array<[WireName, ProviderKind[]]> = [['openai', ['openai']], ['azure_openai', ['azure_openai']], ['compatible', COMPATIBLE], ['anthropic', ['anthropic']], ['google', ['google']]];

describe('every spec 4.1 chat parameter on every wire', () => {
  it('the fixtures cover every parameter the request schema accepts', () => {
    expect(CASES.map((c) => c.param).sort()).toEqual(['model', 'messages', ...Object.keys(CHAT_PARAMETERS)].sort());
  });

  describe.each(WIRES)('%s', (wire, kinds) => {
    it.each(CASES.map((c) => [c.param, c] as const))('%s', (param, c) => {
      for (const kind of kinds) {
        const outcome = through(kind, MODELS[wire], c.extra, c.extra.stream === true);
        const expected = c.expect[wire];
        if (expected === 'refused') {
          expect(outcome).toMatchObject({ refused: { param } });
          expect((outcome as { refused: ParamRefusal }).refused.message).toContain(`\`${param}\``);
        } else if (expected === 'dropped') {
          expect(DROPPABLE_PARAMS as readonly string[]).toContain(param);
          expect((outcome as { dropped: string[] }).dropped).toContain(param);
          expect(JSON.stringify((outcome as { req: UpstreamRequest }).req.body)).not.toContain(param);
        } else {
          expect(outcome).not.toHaveProperty('refused');
          expect((outcome as { dropped: string[] }).dropped).toEqual([]);
          expected((outcome as { req: UpstreamRequest }).req);
        }
      }
    });
  });
});

describe('translations and refusals in detail', () => {
  it('max_tokens and max_completion_tokens together: the larger is sent, once, on every wire (it is what the budget holds)', () => {
    for (const [wire, kinds] of WIRES) {
      for (const kind of kinds) {
        for (const extra of [{ max_tokens: 30, max_completion_tokens: 90 }, { max_tokens: 90, max_completion_tokens: 30 }]) {
          const sent = body((through(kind, MODELS[wire], extra) as { req: UpstreamRequest }).req);
          if (wire === 'anthropic') expect(sent.max_tokens).toBe(90);
          else if (wire === 'google') expect((sent.generationConfig as Record<string, unknown>).maxOutputTokens).toBe(90);
          else expect([kind, sent.max_tokens, sent.max_completion_tokens]).toEqual([kind, 90, undefined]);
        }
      }
    }
    // A reasoning family takes only max_completion_tokens.
    const reasoning = body((through('openai', 'o3-mini', { max_tokens: 30, max_completion_tokens: 90 }) as { req: UpstreamRequest }).req);
    expect([reasoning.max_tokens, reasoning.max_completion_tokens]).toEqual([undefined, 90]);
  });

  it('Anthropic: parallel_tool_calls rides on the tool choice; nothing to disable with none or without tools', () => {
    const send = (extra: Record<string, unknown>) => body((through('anthropic', MODELS.anthropic, extra) as { req: UpstreamRequest }).req);
    expect(send({ tools, tool_choice: 'required', parallel_tool_calls: false }).tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
    expect(send({ tools, tool_choice: 'none', parallel_tool_calls: false }).tool_choice).toEqual({ type: 'none' });
    expect(send({ tools, parallel_tool_calls: true })).not.toHaveProperty('tool_choice');
    expect(send({ parallel_tool_calls: false })).not.toHaveProperty('tool_choice');
    for (const field of ['parallel_tool_calls', 'response_format', 'n', 'user']) expect(send({ tools, parallel_tool_calls: false, n: 1, user: 'u' })).not.toHaveProperty(field);
  });

  it('Anthropic: strict tools stay strict; n of 1 is its default; JSON mode without a schema, n > 1 and temperature above 1 are refused', () => {
    const strict = [{ type: 'function' as const, function: { ...tools[0]!.function, strict: true } }];
    expect(body((through('anthropic', MODELS.anthropic, { tools: strict }) as { req: UpstreamRequest }).req).tools).toEqual([expect.objectContaining({ name: 'get_weather', strict: true })]);
    expect(through('anthropic', MODELS.anthropic, { n: 1 })).not.toHaveProperty('refused');
    expect(through('anthropic', MODELS.anthropic, { response_format: { type: 'text' } })).not.toHaveProperty('refused');
    expect(through('anthropic', MODELS.anthropic, { response_format: { type: 'json_object' } })).toMatchObject({ refused: { param: 'response_format' } });
    expect(through('anthropic', MODELS.anthropic, { response_format: { type: 'json_schema', json_schema: { name: 'x' } } })).toMatchObject({ refused: { param: 'response_format' } });
    expect(through('anthropic', MODELS.anthropic, { n: 2 })).toMatchObject({ refused: { param: 'n' } });
    expect(through('anthropic', MODELS.anthropic, { temperature: 1.5 })).toMatchObject({ refused: { param: 'temperature' } });
    expect(through('anthropic', MODELS.anthropic, { temperature: 1 })).not.toHaveProperty('refused');
  });

  it('Gemini: JSON mode is responseMimeType; n up to 8; parallel_tool_calls true or without tools needs no switch', () => {
    const sent = (extra: Record<string, unknown>) => through('google', MODELS.google, extra) as { req: UpstreamRequest };
    expect(config(sent({ response_format: { type: 'json_object' } }).req)).toEqual({ responseMimeType: 'application/json' });
    expect(body(sent({ response_format: { type: 'text' } }).req)).not.toHaveProperty('generationConfig');
    expect(config(sent({ n: 8 }).req).candidateCount).toBe(8);
    expect(through('google', MODELS.google, { n: 9 })).toMatchObject({ refused: { param: 'n' } });
    expect(through('google', MODELS.google, { tools, parallel_tool_calls: true })).not.toHaveProperty('refused');
    expect(through('google', MODELS.google, { tools, tool_choice: 'none', parallel_tool_calls: false })).not.toHaveProperty('refused');
    expect(through('google', MODELS.google, { parallel_tool_calls: false })).not.toHaveProperty('refused');
  });

  it('Gemini: several candidates decode as several choices, tool calls numbered per choice', () => {
    const r = ADAPTERS.google.parseResponse({ candidates: [{ index: 0, content: { parts: [{ text: 'a' }] }, finishReason: 'STOP' }, { index: 1, content: { parts: [{ text: 'b' }] }, finishReason: 'STOP' }] });
    expect(r.choices.map((c) => [c.index, c.message.content])).toEqual([[0, 'a'], [1, 'b']]);
    const decode = ADAPTERS.google.createStreamDecoder();
    const call = (index: number) => JSON.stringify({ candidates: [{ index, content: { parts: [{ functionCall: { name: 'f', args: {} } }] }, finishReason: 'STOP' }] });
    expect(decode({ data: call(0) })).toEqual([
      { type: 'delta', choices: [{ index: 0, delta: { tool_calls: [expect.objectContaining({ index: 0 })] }, finish_reason: null }] },
      { type: 'delta', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    ]);
    expect(decode({ data: call(1) })[0]).toEqual({ type: 'delta', choices: [{ index: 1, delta: { tool_calls: [expect.objectContaining({ index: 0 })] }, finish_reason: null }] });
  });

  it('OpenAI wire: logprobs come back on choices and stream chunk choices', () => {
    const logprobs = { content: [{ token: 'hi', logprob: -0.1, bytes: [104, 105], top_logprobs: [] }] };
    const r = ADAPTERS.openai.parseResponse({ choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, logprobs, finish_reason: 'stop' }] });
    expect(r.choices[0]!.logprobs).toEqual(logprobs);
    expect(ADAPTERS.openai.parseResponse({ choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, logprobs: null, finish_reason: 'stop' }] }).choices[0]).not.toHaveProperty('logprobs');
    const decoded = ADAPTERS.groq.createStreamDecoder()({ data: JSON.stringify({ choices: [{ index: 0, delta: { content: 'hi' }, logprobs, finish_reason: null }] }) });
    expect(decoded).toEqual([{ type: 'delta', choices: [{ index: 0, delta: { content: 'hi' }, finish_reason: null, logprobs }] }]);
  });

  it('only the nine sampling parameters are ever dropped, on any wire', () => {
    const everything = Object.assign({}, ...CASES.map((c) => c.extra)) as Record<string, unknown>;
    for (const [wire, kinds] of WIRES) {
      for (const kind of kinds) {
        const outcome = through(kind, MODELS[wire], { ...everything, n: 1, user: undefined, parallel_tool_calls: true });
        expect(outcome).not.toHaveProperty('refused');
        for (const dropped of (outcome as { dropped: string[] }).dropped) expect(DROPPABLE_PARAMS as readonly string[]).toContain(dropped);
      }
    }
  });
});
