import Anthropic from '@anthropic-ai/sdk';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { until } from '../helpers/until';

/**
 * The official `@anthropic-ai/sdk`, unmodified but for base URL and key, through the gateway's
 * `POST /v1/messages` (issue 35): served by an OpenAI connection (translated both ways) and by an
 * Anthropic one (through the chat call's Anthropic adapter).
 */
const WIRES = [
  { kind: 'openai', model: 'openai/gpt-4o-mini', dear: 'openai/gpt-4o' },
  { kind: 'anthropic', model: 'anthropic/claude-3-5-haiku-latest', dear: 'anthropic/claude-3-5-haiku-latest' },
] as const;

const weather: Anthropic.Tool = { name: 'get_weather', description: 'Weather in a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };

describe.each(WIRES)('Anthropic SDK through the gateway to $kind', ({ kind, model, dear }) => {
  let fixture: ChatFixture;
  let sdk: Anthropic;
  let secret: string;

  beforeAll(async () => {
    fixture = await startChatFixture();
    await fixture.connect(kind);
    secret = await fixture.key();
    sdk = new Anthropic({ apiKey: secret, baseURL: fixture.api.url, maxRetries: 0 });
  });
  afterAll(() => fixture.close());

  it('creates a message; usage and the gateway fields come with it, the request log says messages', async () => {
    const { data, response } = await sdk.messages.create({ model, max_tokens: 200, system: 'Be brief.', messages: [{ role: 'user', content: 'Say hello' }] }).withResponse();
    expect(data.type).toBe('message');
    expect(data.role).toBe('assistant');
    expect(data.id).toBe(`msg_${response.headers.get('x-gw-request-id')}`);
    expect(data.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^Hello from the sandbox model /) });
    expect(data.stop_reason).toBe('end_turn');
    // Word counts: "Be brief. Say hello" is 4 prompt words; the 6-word reply.
    expect(data.usage).toMatchObject({ input_tokens: 4, output_tokens: 6 });
    expect(data as unknown as Loose).toMatchObject({ provider: kind, route: 'primary', connection: expect.stringMatching(/^conn_/), usage: { cost: expect.any(Number) } });
    const log = await until(async () => {
      const res = await fixture.client.get<Loose>(`/requests/${response.headers.get('x-gw-request-id')}`);
      return res.status === 200 && res;
    }, 'the request-log row');
    expect(log.body).toMatchObject({ endpoint: 'messages', status: 200, provider: kind });
  });

  it('streams every event in order, and finalMessage() assembles the answer', async () => {
    const stream = sdk.messages.stream({ model, max_tokens: 200, messages: [{ role: 'user', content: 'Say hello' }] });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const message = await stream.finalMessage();
    expect(message.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^Hello from the sandbox model /) });
    expect(message.stop_reason).toBe('end_turn');
    expect(message.usage.output_tokens).toBe(6);
    expect(types[0]).toBe('message_start');
    expect(types[1]).toBe('content_block_start');
    expect(types.filter((t) => t === 'content_block_delta').length).toBeGreaterThan(0);
    expect(types.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
  });

  it('streams a provider whose event data spans several `data:` lines, the SSE framing kept', async () => {
    // The sandbox indents each event's JSON over several lines (each its own `data:` field).
    const stream = sdk.messages.stream({ model, max_tokens: 200, messages: [{ role: 'user', content: 'Say hello [sandbox multiline_data]' }] });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const message = await stream.finalMessage();
    expect(message.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^Hello from the sandbox model /) });
    expect(message.usage.output_tokens).toBe(6);
    expect(types[0]).toBe('message_start');
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
  });

  it('runs a two-step tool loop', async () => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await sdk.messages.create({ model, max_tokens: 200, messages, tools: [weather] });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(use).toMatchObject({ name: 'get_weather', input: { city: 'sandbox' } });
    messages.push({ role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] });
    const second = await sdk.messages.create({ model, max_tokens: 200, messages, tools: [weather] });
    expect(second.stop_reason).toBe('end_turn');
    expect((second.content[0] as Anthropic.TextBlock).text).toContain('sunny');
  });

  it('streams a tool use as input_json_delta', async () => {
    const stream = sdk.messages.stream({ model, max_tokens: 200, messages: [{ role: 'user', content: 'Weather?' }], tools: [weather], tool_choice: { type: 'any' } });
    const message = await stream.finalMessage();
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content.find((b) => b.type === 'tool_use')).toMatchObject({ name: 'get_weather', input: { city: 'sandbox' } });
  });

  it(kind === 'anthropic' ? 'thinks, the thinking block and its signature passed along, whole and streamed' : 'answers without thinking, `thinking` named as dropped', async () => {
    const ask = { model, max_tokens: 2000, thinking: { type: 'enabled' as const, budget_tokens: 1024 }, messages: [{ role: 'user' as const, content: 'Say hello' }] };
    const { data, response } = await sdk.messages.create(ask).withResponse();
    const streamed = await sdk.messages.stream(ask).finalMessage();
    for (const message of [data, streamed]) {
      const text = message.content.find((b): b is Anthropic.TextBlock => b.type === 'text');
      expect(text?.text).toMatch(/^Hello from the sandbox model /);
      const thinking = message.content.find((b): b is Anthropic.ThinkingBlock => b.type === 'thinking');
      if (kind === 'anthropic') expect(thinking).toMatchObject({ thinking: expect.any(String), signature: expect.stringMatching(/^sandbox-signature-/) });
      else expect(thinking).toBeUndefined();
    }
    expect(response.headers.get('x-gw-params-dropped')).toBe(kind === 'anthropic' ? null : 'thinking');
    expect(data as unknown as Loose).toMatchObject({ id: `msg_${response.headers.get('x-gw-request-id')}`, provider: kind, usage: { cost: expect.any(Number) } });
  });

  it(kind === 'anthropic' ? 'passes cache_control through to Anthropic' : 'translates a request with cache_control for OpenAI', async () => {
    const before = fixture.sandbox.received.length;
    const created = await sdk.messages.create({
      model, max_tokens: 100,
      system: [{ type: 'text', text: 'A long, stable system prompt.', cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello', cache_control: { type: 'ephemeral' } }] }],
    });
    expect(created.content[0]).toMatchObject({ type: 'text' });
    const sent = JSON.stringify(fixture.sandbox.received.slice(before).at(-1)!.body);
    if (kind === 'anthropic') expect(sent).toContain('"cache_control":{"type":"ephemeral"}');
    else expect(sent).not.toContain('cache_control');
  });

  // Today's request shapes (the SDK's own types), as Claude Code sends them (issue 53).
  it(kind === 'anthropic'
    ? 'takes a system message between turns, adaptive thinking and output_config, passed along as they came, whole and streamed'
    : 'takes a system message between turns, adaptive thinking and output_config: JSON as asked, the effort and thinking named as dropped', async () => {
    const params: Anthropic.MessageCreateParamsNonStreaming = {
      model, max_tokens: 2000,
      thinking: { type: 'adaptive', display: 'summarized' },
      output_config: { effort: 'medium', format: { type: 'json_schema', schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } } },
      messages: [{ role: 'user', content: 'Which city?' }, { role: 'system', content: [{ type: 'text', text: 'Answer as JSON.' }] }],
    };
    const { data, response } = await sdk.messages.create(params).withResponse();
    const streamed = await sdk.messages.stream(params).finalMessage();
    for (const message of [data, streamed]) {
      const text = message.content.find((b): b is Anthropic.TextBlock => b.type === 'text');
      expect(JSON.parse(text!.text)).toEqual({ city: 'sandbox' });
      const thinking = message.content.find((b): b is Anthropic.ThinkingBlock => b.type === 'thinking');
      if (kind === 'anthropic') expect(thinking).toMatchObject({ thinking: expect.stringMatching(/\S/), signature: expect.stringMatching(/^sandbox-signature-/) });
      else expect(thinking).toBeUndefined();
    }
    expect(response.headers.get('x-gw-params-dropped')).toBe(kind === 'anthropic' ? null : 'output_config.effort,thinking');
  });

  it(kind === 'anthropic' ? 'sends output_config.effort to Anthropic as it came' : 'sends output_config.effort to an OpenAI model that reasons as its reasoning effort', async () => {
    const before = fixture.sandbox.received.length;
    const reasoner = kind === 'anthropic' ? model : 'openai/o3-mini';
    const { data, response } = await sdk.messages.create({ model: reasoner, max_tokens: 200, output_config: { effort: 'low' }, messages: [{ role: 'user', content: 'Say hello' }] }).withResponse();
    expect(data.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^Hello from the sandbox model /) });
    expect(response.headers.get('x-gw-params-dropped')).toBeNull();
    const sent = fixture.sandbox.received.slice(before).at(-1)!.body as Loose;
    if (kind === 'anthropic') expect(sent.output_config).toEqual({ effort: 'low' });
    else expect(sent).toMatchObject({ model: 'o3-mini', reasoning_effort: 'low' });
  });

  it('takes context_management through the beta messages, named as dropped where it cannot go', async () => {
    const { data, response } = await sdk.beta.messages.create({
      model, max_tokens: 200, betas: ['context-management-2025-06-27'],
      context_management: { edits: [{ type: 'clear_tool_uses_20250919', keep: { type: 'tool_uses', value: 3 } }] },
      messages: [{ role: 'user', content: 'Say hello' }],
    }).withResponse();
    expect(data.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^Hello from the sandbox model /) });
    // On OpenAI it has no equivalent; this Anthropic connection does not allow its beta.
    expect(response.headers.get('x-gw-params-dropped')).toBe('context_management');
  });

  it('counts tokens without calling a provider', async () => {
    const counted = await sdk.messages.countTokens({ model, messages: [{ role: 'user', content: 'Say hello to the whole wide world' }] });
    expect(counted.input_tokens).toBeGreaterThan(0);
  });

  it('surfaces a bad key as the SDK\'s AuthenticationError and a budget refusal as a 402 APIError, with the gateway\'s codes', async () => {
    const stranger = new Anthropic({ apiKey: 'gw_live_not_a_key', baseURL: fixture.api.url, maxRetries: 0 });
    const denied = await stranger.messages.create({ model, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((denied as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'authentication_error', gateway_type: 'authentication_error', message: 'Invalid API key.' } });

    // 16,000 output tokens of `dear` cost more than $0.01 (and stay under the SDK's ceiling for a call without streaming).
    const broke = new Anthropic({ apiKey: await fixture.key({ credit_limit: { amount: 0.01, period: 'monthly' } }), baseURL: fixture.api.url, maxRetries: 0 });
    const refused = await broke.messages.create({ model: dear, max_tokens: 16_000, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
    expect((refused as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'billing_error', gateway_type: 'budget_exceeded', code: 'key_budget' } });
  });

  it('takes the key as a Bearer token too, and answers a bad request in Anthropic\'s shape', async () => {
    const res = await fetch(`${fixture.api.url}/v1/messages`, {
      method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'no max_tokens' }] }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', gateway_type: 'invalid_request_error', message: expect.stringContaining('max_tokens') } });
  });
});
