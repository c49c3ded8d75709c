import OpenAI from 'openai';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';

/**
 * Issue 12 section 3 "Done when": the official `openai` SDK against the gateway, one
 * connection of each wire on the sandbox. Translated parameters reach the sandbox in the
 * provider's form (and the sandbox, validating like the real API, answers accordingly);
 * parameters a wire cannot carry are a 400 invalid_request_error naming them; only the nine
 * sampling parameters are dropped, each named in X-GW-Params-Dropped.
 */
type Body = Record<string, unknown>;
type APIError = InstanceType<typeof OpenAI.APIError>;

const weather = { type: 'object', properties: { city: { type: 'string' }, degrees: { type: 'number' } }, required: ['city', 'degrees'], additionalProperties: false };
const jsonSchema = { type: 'json_schema' as const, json_schema: { name: 'weather', strict: true, schema: weather } };
const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
];
/** The sandbox calls every offered tool at once unless the request turned parallel calls off. */
const both = [{ role: 'user' as const, content: 'Weather and time? [sandbox parallel_tools]' }];
const hello = [{ role: 'user' as const, content: 'Say hello' }];

describe('chat parameters through the openai SDK on every wire', () => {
  let f: ChatFixture;
  let sdk: OpenAI;
  const lastBody = () => f.sandbox.received.at(-1)!.body as Body;
  const lastPath = () => f.sandbox.received.at(-1)!.path;
  const refusal = (p: Promise<unknown>) => p.then(() => { throw new Error('expected a 400'); }, (e: unknown) => e as APIError);
  const callNames = (c: OpenAI.ChatCompletion) => (c.choices[0]!.message.tool_calls ?? []).map((t) => (t as OpenAI.ChatCompletionMessageToolCall & { function: { name: string } }).function.name);

  beforeAll(async () => {
    f = await startChatFixture();
    for (const kind of ['openai', 'azure_openai', 'cerebras', 'anthropic', 'google']) await f.connect(kind);
    sdk = new OpenAI({ apiKey: await f.key(), baseURL: `${f.api.url}/v1`, maxRetries: 0 });
  });
  afterAll(() => f.close());

  describe.each([
    { wire: 'openai', model: 'openai/gpt-4o-mini', path: '/openai/v1/chat/completions' },
    { wire: 'azure_openai', model: 'azure_openai/gpt-4o-mini', path: '/azure/openai/deployments/gpt-4o-mini/chat/completions' },
    { wire: 'cerebras (OpenAI-compatible)', model: 'cerebras/llama3.1-8b', path: '/openai/v1/chat/completions' },
  ])('$wire: every parameter is native', ({ wire, model, path }) => {
    it('sends n, logprobs, top_logprobs, logit_bias, seed, user, stop, penalties and a JSON schema as they came; answers n choices with logprobs and schema-shaped JSON', async () => {
      const { data, response } = await sdk.chat.completions.create({
        model, messages: hello, n: 2, logprobs: true, top_logprobs: 2, logit_bias: { 50256: -100 }, seed: 7, user: 'end-user-1', stop: ['END'],
        frequency_penalty: 0.1, presence_penalty: 0.2, temperature: 0.5, top_p: 0.9, max_tokens: 50, response_format: jsonSchema,
      }).withResponse();
      expect(lastPath()).toContain(path);
      expect(lastBody()).toMatchObject({ n: 2, logprobs: true, top_logprobs: 2, logit_bias: { 50256: -100 }, seed: 7, user: 'end-user-1', stop: ['END'], frequency_penalty: 0.1, presence_penalty: 0.2, temperature: 0.5, top_p: 0.9, max_tokens: 50, response_format: jsonSchema });
      expect(response.headers.get('x-gw-params-dropped')).toBeNull();
      expect(data.choices.map((c) => c.index)).toEqual([0, 1]);
      expect(JSON.parse(data.choices[1]!.message.content!)).toEqual({ city: 'sandbox', degrees: 1 });
      expect(data.choices[0]!.logprobs?.content?.[0]).toMatchObject({ token: expect.any(String), logprob: expect.any(Number), top_logprobs: [expect.anything(), expect.anything()] });
    });

    it('parallel_tool_calls: true lets the model call both tools, false keeps it to one', async () => {
      expect(callNames(await sdk.chat.completions.create({ model, messages: both, tools, parallel_tool_calls: true }))).toEqual(['get_weather', 'get_time']);
      expect(callNames(await sdk.chat.completions.create({ model, messages: both, tools, parallel_tool_calls: false }))).toEqual(['get_weather']);
      expect(lastBody()).toMatchObject({ parallel_tool_calls: false });
    });

    it(wire === 'cerebras (OpenAI-compatible)' ? 'top_k is sent (compatible servers take it)' : 'top_k has no place on OpenAI\'s wire: dropped and named', async () => {
      const { response } = await sdk.chat.completions.create({ model, messages: hello, top_k: 5 } as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
      if (wire.startsWith('cerebras')) {
        expect(lastBody()).toMatchObject({ top_k: 5 });
        expect(response.headers.get('x-gw-params-dropped')).toBeNull();
      } else {
        expect(lastBody()).not.toHaveProperty('top_k');
        expect(response.headers.get('x-gw-params-dropped')).toBe('top_k');
      }
    });
  });

  describe('anthropic', () => {
    const model = 'anthropic/claude-sonnet-4-5';

    it('response_format json_schema becomes output_config.format; the answer is the schema-shaped JSON, whole and streamed', async () => {
      const data = await sdk.chat.completions.create({ model, messages: hello, response_format: jsonSchema });
      expect(lastBody()).toMatchObject({ output_config: { format: { type: 'json_schema', schema: weather } } });
      expect(lastBody()).not.toHaveProperty('response_format');
      expect(JSON.parse(data.choices[0]!.message.content!)).toEqual({ city: 'sandbox', degrees: 1 });
      let text = '';
      for await (const chunk of await sdk.chat.completions.create({ model, messages: hello, response_format: jsonSchema, stream: true })) text += chunk.choices[0]?.delta.content ?? '';
      expect(JSON.parse(text)).toEqual({ city: 'sandbox', degrees: 1 });
    });

    it('parallel_tool_calls false becomes tool_choice.disable_parallel_tool_use and keeps the model to one call', async () => {
      expect(callNames(await sdk.chat.completions.create({ model, messages: both, tools }))).toEqual(['get_weather', 'get_time']);
      expect(callNames(await sdk.chat.completions.create({ model, messages: both, tools, parallel_tool_calls: false }))).toEqual(['get_weather']);
      expect(lastBody().tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true });
      expect(callNames(await sdk.chat.completions.create({ model, messages: both, tools, tool_choice: 'required', parallel_tool_calls: false }))).toEqual(['get_weather']);
      expect(lastBody().tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
    });

    it('user becomes metadata.user_id, stop stop_sequences, top_k is sent; seed, penalties and logprobs are dropped and named', async () => {
      const { response } = await sdk.chat.completions.create({
        model, messages: hello, user: 'end-user-2', stop: 'END', seed: 3, frequency_penalty: 0.1, presence_penalty: 0.1, logprobs: true, top_logprobs: 1, logit_bias: { 1: 1 }, top_k: 4, temperature: 0.3,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
      expect(lastBody()).toMatchObject({ metadata: { user_id: 'end-user-2' }, stop_sequences: ['END'], top_k: 4, temperature: 0.3 });
      expect(response.headers.get('x-gw-params-dropped')!.split(',').sort()).toEqual(['frequency_penalty', 'logit_bias', 'logprobs', 'presence_penalty', 'seed', 'top_logprobs']);
    });

    it('n > 1, temperature above 1 and JSON mode without a schema are refused with a 400 naming the parameter, before any call', async () => {
      const before = f.sandbox.received.length;
      const n = await refusal(sdk.chat.completions.create({ model, messages: hello, n: 2 }));
      expect(n).toBeInstanceOf(OpenAI.BadRequestError);
      expect([n.status, n.type, n.param]).toEqual([400, 'invalid_request_error', 'n']);
      expect(n.message).toContain('`n`');
      const temperature = await refusal(sdk.chat.completions.create({ model, messages: hello, temperature: 1.5 }));
      expect([temperature.status, temperature.param]).toEqual([400, 'temperature']);
      const json = await refusal(sdk.chat.completions.create({ model, messages: hello, response_format: { type: 'json_object' } }));
      expect([json.status, json.type, json.param]).toEqual([400, 'invalid_request_error', 'response_format']);
      expect(f.sandbox.received.length).toBe(before);
      expect((await sdk.chat.completions.create({ model, messages: hello, n: 1 })).choices).toHaveLength(1);
    });

    it('a refusing candidate is skipped: n = 2 on Anthropic with an OpenAI fallback is served by OpenAI', async () => {
      const data = await sdk.chat.completions.create({ model, messages: hello, n: 2, fallbacks: ['openai/gpt-4o-mini'] } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect((data as unknown as { provider: string }).provider).toBe('openai');
      expect(data.choices).toHaveLength(2);
      expect(lastBody()).toMatchObject({ n: 2 });
    });
  });

  describe('google', () => {
    const model = 'google/gemini-2.0-flash';

    it('n becomes candidateCount and comes back as n choices, whole and streamed', async () => {
      const data = await sdk.chat.completions.create({ model, messages: hello, n: 3 });
      expect(lastBody().generationConfig).toMatchObject({ candidateCount: 3 });
      expect(data.choices.map((c) => [c.index, c.message.content])).toEqual([0, 1, 2].map((i) => [i, 'Hello from the sandbox model gemini-2.0-flash.']));
      const texts = ['', ''];
      for await (const chunk of await sdk.chat.completions.create({ model, messages: hello, n: 2, stream: true })) for (const c of chunk.choices) texts[c.index] += c.delta.content ?? '';
      expect(texts).toEqual(['Hello from the sandbox model gemini-2.0-flash.', 'Hello from the sandbox model gemini-2.0-flash.']);
    });

    it('response_format becomes responseMimeType and responseJsonSchema; the answer is the schema-shaped JSON', async () => {
      const data = await sdk.chat.completions.create({ model, messages: hello, response_format: jsonSchema });
      expect(lastBody().generationConfig).toEqual({ responseMimeType: 'application/json', responseJsonSchema: weather });
      expect(JSON.parse(data.choices[0]!.message.content!)).toEqual({ city: 'sandbox', degrees: 1 });
      const mode = await sdk.chat.completions.create({ model, messages: hello, response_format: { type: 'json_object' } });
      expect(lastBody().generationConfig).toEqual({ responseMimeType: 'application/json' });
      expect(JSON.parse(mode.choices[0]!.message.content!)).toEqual({ reply: 'Hello from the sandbox model gemini-2.0-flash.' });
    });

    it('sampling parameters go to generationConfig; logprobs, top_logprobs and logit_bias are dropped and named', async () => {
      const { response } = await sdk.chat.completions.create({
        model, messages: hello, temperature: 1.2, top_p: 0.8, top_k: 10, seed: 9, stop: ['END'], frequency_penalty: 0.3, presence_penalty: 0.4, max_completion_tokens: 40, logprobs: true, top_logprobs: 2, logit_bias: { 5: 5 },
      } as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
      expect(lastBody().generationConfig).toEqual({ temperature: 1.2, topP: 0.8, topK: 10, seed: 9, stopSequences: ['END'], frequencyPenalty: 0.3, presencePenalty: 0.4, maxOutputTokens: 40 });
      expect(response.headers.get('x-gw-params-dropped')!.split(',').sort()).toEqual(['logit_bias', 'logprobs', 'top_logprobs']);
    });

    it('user and parallel_tool_calls false have no Gemini equivalent: 400 naming them, before any call', async () => {
      const before = f.sandbox.received.length;
      const user = await refusal(sdk.chat.completions.create({ model, messages: hello, user: 'end-user-3' }));
      expect([user.status, user.type, user.param]).toEqual([400, 'invalid_request_error', 'user']);
      expect(user.message).toContain('`user`');
      const serial = await refusal(sdk.chat.completions.create({ model, messages: both, tools, parallel_tool_calls: false }));
      expect([serial.status, serial.param]).toEqual([400, 'parallel_tool_calls']);
      const many = await refusal(sdk.chat.completions.create({ model, messages: hello, n: 9 }));
      expect([many.status, many.param]).toEqual([400, 'n']);
      expect(f.sandbox.received.length).toBe(before);
      expect(callNames(await sdk.chat.completions.create({ model, messages: both, tools, parallel_tool_calls: true }))).toEqual(['get_weather', 'get_time']);
    });
  });

  it('the request schema bounds every parameter (400 naming it before any provider)', async () => {
    for (const [param, value] of [['n', 0], ['n', 129], ['top_logprobs', 21], ['logit_bias', { 1: 101 }], ['parallel_tool_calls', 'yes'], ['response_format', { type: 'xml' }], ['stop', ['a', 'b', 'c', 'd', 'e']], ['seed', 1.5]] as const) {
      const err = await refusal(sdk.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: hello, [param]: value } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming));
      expect([param, err.status, err.type]).toEqual([param, 400, 'invalid_request_error']);
      expect(err.message).toContain(param);
    }
  });
});
