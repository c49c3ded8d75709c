import OpenAI from 'openai';
import OpenAIv6 from 'openai-v6';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';

/**
 * The official `openai` SDK, pointed at the gateway, against the sandbox in all three wire
 * formats (issue 4, "Done when"): a chat, a stream, a tool-call round trip and an error.
 */
const WIRES = [
  { kind: 'openai', model: 'openai/gpt-4o-mini' },
  { kind: 'anthropic', model: 'anthropic/claude-3-5-haiku-latest' },
  { kind: 'google', model: 'google/gemini-2.0-flash' },
] as const;

describe.each(WIRES)('openai SDK through the gateway to $kind', ({ kind, model }) => {
  let fixture: ChatFixture;
  let sdk: OpenAI;

  beforeAll(async () => {
    fixture = await startChatFixture();
    await fixture.connect(kind);
    sdk = new OpenAI({ apiKey: await fixture.key(), baseURL: `${fixture.api.url}/v1`, maxRetries: 0 });
  });
  afterAll(() => fixture.close());

  it('completes a chat; the body id is the X-GW-Request-Id', async () => {
    const { data, response } = await sdk.chat.completions.create({ model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }] }).withResponse();
    expect(data.choices[0]!.message.content).toMatch(/^Hello from the sandbox model /);
    expect(data.choices[0]!.finish_reason).toBe('stop');
    expect(data.id).toBe(response.headers.get('x-gw-request-id'));
    expect(data).toMatchObject({ object: 'chat.completion', route: 'primary', route_name: null, provider: kind, connection: expect.stringMatching(/^conn_/) });
    // Word counts: "Be brief. Say hello" is 4 prompt words; the 6-word reply.
    expect(data.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 });
    expect(response.headers.get('x-ratelimit-limit')).toBe('200');
  });

  it('streams, with a final usage chunk when asked', async () => {
    const stream = await sdk.chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Say hello' }] });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toMatch(/^Hello from the sandbox model /);
    expect(finish).toBe('stop');
    expect(usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 6, total_tokens: 8 });
  });

  it('round-trips a tool call', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await sdk.chat.completions.create({ model, messages, tools });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageToolCall & { function: { name: string; arguments: string } };
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'sandbox' });

    messages.push(choice.message as OpenAI.ChatCompletionMessageParam, { role: 'tool', tool_call_id: call.id, content: 'sunny' });
    const second = await sdk.chat.completions.create({ model, messages, tools });
    expect(second.choices[0]!.message.content).toContain('sunny');
    expect(second.choices[0]!.finish_reason).toBe('stop');
  });

  it('streams a tool call', async () => {
    const stream = await sdk.chat.completions.create({
      model, stream: true, messages: [{ role: 'user', content: 'Weather?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    });
    let name = '';
    let args = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const t of chunk.choices[0]?.delta.tool_calls ?? []) {
        name += t.function?.name ?? '';
        args += t.function?.arguments ?? '';
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect([name, JSON.parse(args), finish]).toEqual(['get_weather', { city: 'sandbox' }, 'tool_calls']);
  });

  it('surfaces errors as the SDK\'s typed errors', async () => {
    const missing = await sdk.chat.completions.create({ model: `${kind}-nope/x`, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.APIError>).code).toBe('model_not_found');
    const bad = await sdk.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], temperature: 3 }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.APIError>).type).toBe('invalid_request_error');
  });
});

/**
 * The previous major of the SDK (6.x, installed as `openai-v6`), which many applications still
 * run: a chat, a stream with usage and a typed error, as the current one does above.
 */
describe('openai SDK 6 (the previous major) through the gateway', () => {
  let fixture: ChatFixture;
  let sdk: OpenAIv6;

  beforeAll(async () => {
    fixture = await startChatFixture();
    await fixture.connect('openai');
    sdk = new OpenAIv6({ apiKey: await fixture.key(), baseURL: `${fixture.api.url}/v1`, maxRetries: 0 });
  });
  afterAll(() => fixture.close());

  it('completes a chat, streams with usage, and surfaces a refusal as its typed error', async () => {
    const { data, response } = await sdk.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] }).withResponse();
    expect(data.choices[0]!.message.content).toMatch(/^Hello from the sandbox model /);
    expect(data.id).toBe(response.headers.get('x-gw-request-id'));
    const stream = await sdk.chat.completions.create({ model: 'openai/gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Say hello' }] });
    let text = '';
    let usage: OpenAIv6.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toMatch(/^Hello from the sandbox model /);
    expect(usage).toMatchObject({ completion_tokens: 6 });
    await expect(sdk.chat.completions.create({ model: 'openai/no-such-model-anywhere', messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(OpenAIv6.NotFoundError);
  });
});
