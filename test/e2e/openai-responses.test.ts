import OpenAI from 'openai';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { until } from '../helpers/until';

/**
 * The official `openai` SDK's Responses API, unmodified but for base URL and key, through the
 * gateway's `POST /v1/responses` (issue 35): served by an OpenAI connection and by an Anthropic
 * one (translated both ways through the one chat call).
 */
const WIRES = [
  { kind: 'openai', model: 'openai/gpt-4o-mini' },
  { kind: 'anthropic', model: 'anthropic/claude-3-5-haiku-latest' },
] as const;

const weather: OpenAI.Responses.FunctionTool = { type: 'function', name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }, strict: true };

describe.each(WIRES)('openai SDK responses through the gateway to $kind', ({ kind, model }) => {
  let fixture: ChatFixture;
  let sdk: OpenAI;

  beforeAll(async () => {
    fixture = await startChatFixture();
    // Responses are kept only where the organization keeps prompts.
    const settings = await fixture.client.get<Loose>('/org_settings');
    expect((await fixture.client.patch('/org_settings', { prompt_logging_enabled: true }, settings.etag!)).status).toBe(200);
    await fixture.connect(kind);
    sdk = new OpenAI({ apiKey: await fixture.key(), baseURL: `${fixture.api.url}/v1`, maxRetries: 0 });
  });
  afterAll(() => fixture.close());

  it('creates a response from a string input and instructions; the log says responses', async () => {
    const { data, response } = await sdk.responses.create({ model, instructions: 'Be brief.', input: 'Say hello' }).withResponse();
    expect(data).toMatchObject({ object: 'response', status: 'completed', id: `resp_${response.headers.get('x-gw-request-id')}` });
    expect(data.output_text).toMatch(/^Hello from the sandbox model /);
    expect(data.output[0]).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'output_text' }] });
    // Word counts: "Be brief. Say hello" is 4 prompt words; the 6-word reply.
    expect(data.usage).toMatchObject({ input_tokens: 4, output_tokens: 6, total_tokens: 10 });
    expect(data as unknown as Loose).toMatchObject({ provider: kind, route: 'primary', usage: { cost: expect.any(Number) } });
    const log = await until(async () => {
      const res = await fixture.client.get<Loose>(`/requests/${response.headers.get('x-gw-request-id')}`);
      return res.status === 200 && res;
    }, 'the request-log row');
    expect(log.body).toMatchObject({ endpoint: 'responses', status: 200, provider: kind });
  });

  it('streams the semantic events, and finalResponse() assembles the answer', async () => {
    const stream = sdk.responses.stream({ model, input: [{ role: 'user', content: 'Say hello' }] });
    const types: string[] = [];
    let text = '';
    stream.on('event', (e) => types.push(e.type));
    stream.on('response.output_text.delta', (e) => (text += e.delta));
    const final = await stream.finalResponse();
    expect(text).toMatch(/^Hello from the sandbox model /);
    expect(final.output_text).toBe(text);
    expect(final.usage?.output_tokens).toBe(6);
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.at(-1)).toBe('response.completed');
  });

  it('runs a function-tool loop', async () => {
    const first = await sdk.responses.create({ model, input: 'Weather in Paris?', tools: [weather] });
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    expect(call).toMatchObject({ name: 'get_weather' });
    expect(JSON.parse(call.arguments)).toEqual({ city: 'sandbox' });
    const second = await sdk.responses.create({
      model, tools: [weather],
      input: [{ role: 'user', content: 'Weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
    });
    expect(second.output_text).toContain('sunny');
  });

  it('streams a function call as argument deltas', async () => {
    const stream = sdk.responses.stream({ model, input: 'Weather?', tools: [weather], tool_choice: 'required' });
    let args = '';
    stream.on('response.function_call_arguments.delta', (e) => (args += e.delta));
    const final = await stream.finalResponse();
    const call = final.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.arguments).toBe(args);
    expect(JSON.parse(args)).toEqual({ city: 'sandbox' });
  });

  it('answers structured output to a JSON schema', async () => {
    const res = await sdk.responses.create({
      model, input: 'A city, please',
      text: { format: { type: 'json_schema', name: 'city', strict: true, schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false } } },
    });
    expect(JSON.parse(res.output_text)).toEqual({ name: 'sandbox' });
  });

  it('continues a kept response with previous_response_id, whole and streamed, and retrieves it', async () => {
    const first = await sdk.responses.create({ model, instructions: 'Be brief.', input: 'My name is Ada. Say hello' });
    expect((first as unknown as Loose).store).toBe(true);
    const second = await sdk.responses.create({ model, previous_response_id: first.id, input: 'What is my name?' });
    expect(second.previous_response_id).toBe(first.id);
    // The provider was given the earlier turn and its answer, then the new input; not the earlier instructions.
    const sent = JSON.stringify(fixture.sandbox.received.at(-1)!.body);
    expect(sent).toContain('My name is Ada. Say hello');
    expect(sent).toContain(first.output_text);
    expect(sent).toContain('What is my name?');
    expect(sent).not.toContain('Be brief.');

    // A streamed continuation is kept before its end reaches the client: the next one finds it at once.
    const stream = sdk.responses.stream({ model, previous_response_id: second.id, input: 'And again?' });
    const third = await stream.finalResponse();
    expect(third).toMatchObject({ store: true, previous_response_id: second.id });
    const fourth = await sdk.responses.create({ model, previous_response_id: third.id, input: 'Last one' });
    expect(JSON.stringify(fixture.sandbox.received.at(-1)!.body)).toContain('And again?');
    expect(fourth.status).toBe('completed');

    const read = await sdk.responses.retrieve(first.id);
    expect(read).toMatchObject({ id: first.id, object: 'response', status: 'completed', output: first.output, usage: first.usage });
    expect(read.output_text).toBe(first.output_text);

    const missing = await sdk.responses.create({ model, input: 'again', previous_response_id: 'resp_nothing_here' }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ type: 'not_found', param: 'previous_response_id' });
  });

  it('takes the tools and input items the current SDK sends: every kind to OpenAI, the function tools across', async () => {
    const tools: OpenAI.Responses.Tool[] = [
      weather,
      { type: 'namespace', name: 'crm', description: 'Customer records.', tools: [{ type: 'function', name: 'find_customer', parameters: { type: 'object', properties: { name: { type: 'string' } } } }] },
      { type: 'web_search' },
      { type: 'custom', name: 'apply_patch', description: 'Applies a patch.' },
    ];
    const input: OpenAI.Responses.ResponseInput = [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Answer briefly.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] },
    ];
    const { data, response } = await sdk.responses.create({ model, input, tools, include: ['reasoning.encrypted_content'], prompt_cache_key: 'session-7', store: false }).withResponse();
    const call = data.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
    expect(call).toMatchObject({ name: 'get_weather' });
    const sent = fixture.sandbox.received.at(-1)!;
    if (kind === 'openai') {
      expect(sent.body).toMatchObject({ input, tools, include: ['reasoning.encrypted_content'], prompt_cache_key: 'session-7' });
      expect(response.headers.get('x-gw-params-dropped')).toBeNull();
    } else {
      expect(sent.body).toMatchObject({ system: 'Answer briefly.', tools: [{ name: 'get_weather' }] });
      expect((sent.body as Loose).tools).toHaveLength(1);
      expect(response.headers.get('x-gw-params-dropped')).toBe('include,prompt_cache_key,tools:namespace,tools:web_search,tools:custom');
    }
  });

  it('keeps nothing with store: false', async () => {
    const res = await sdk.responses.create({ model, input: 'Say hello', store: false });
    expect((res as unknown as Loose).store).toBe(false);
    await expect(sdk.responses.retrieve(res.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

/**
 * Served by OpenAI, a Responses request goes to OpenAI's own `/responses` as it came (issue 35):
 * what only that wire carries (reasoning items with their summary and encrypted content,
 * `include`) reaches the client; OpenAI is never asked to keep it; across wires those fields are
 * named as dropped.
 */
describe('openai SDK responses passed through to OpenAI\'s own Responses wire', () => {
  let fixture: ChatFixture;
  let sdk: OpenAI;
  const model = 'openai/o3-mini';

  beforeAll(async () => {
    fixture = await startChatFixture();
    const settings = await fixture.client.get<Loose>('/org_settings');
    expect((await fixture.client.patch('/org_settings', { prompt_logging_enabled: true }, settings.etag!)).status).toBe(200);
    await fixture.connect('openai');
    await fixture.connect('anthropic');
    sdk = new OpenAI({ apiKey: await fixture.key(), baseURL: `${fixture.api.url}/v1`, maxRetries: 0 });
  });
  afterAll(() => fixture.close());

  const reasoning = { effort: 'low', summary: 'auto' } as const;

  it('keeps reasoning items, their summary and encrypted content; the id, store and cost are the gateway\'s', async () => {
    const { data, response } = await sdk.responses.create({ model, input: 'Say hello', reasoning, include: ['reasoning.encrypted_content'] }).withResponse();
    const sent = fixture.sandbox.received.at(-1)!;
    expect(sent.path).toBe('/openai/v1/responses');
    expect(sent.body).toMatchObject({ model: 'o3-mini', input: [{ type: 'message', role: 'user', content: 'Say hello' }], reasoning, include: ['reasoning.encrypted_content'], store: false });
    expect(data.id).toBe(`resp_${response.headers.get('x-gw-request-id')}`);
    expect(data.output[0]).toMatchObject({ type: 'reasoning', summary: [{ type: 'summary_text' }], encrypted_content: expect.any(String) });
    expect(data.output_text).toMatch(/^Hello from the sandbox model /);
    expect(data as unknown as Loose).toMatchObject({ store: true, provider: 'openai', route: 'primary', usage: { input_tokens: 2, cost: expect.any(Number), price_source: 'list' } });
    expect(response.headers.get('x-gw-params-dropped')).toBeNull();

    // Continuing sends the kept conversation, reasoning item included (it carries its content), never an id OpenAI did not keep.
    await sdk.responses.create({ model, previous_response_id: data.id, input: 'Again', reasoning });
    const next = fixture.sandbox.received.at(-1)!.body as Loose;
    expect(next.previous_response_id).toBeUndefined();
    expect(next.input.map((i: Loose) => i.type ?? i.role)).toEqual(['message', 'reasoning', 'message', 'message']);
  });

  it('streams OpenAI\'s own events, renumbered, ending with the gateway\'s response', async () => {
    const stream = sdk.responses.stream({ model, input: 'Say hello', reasoning });
    const events: Loose[] = [];
    stream.on('event', (e) => events.push(e));
    const final = await stream.finalResponse();
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.at(-1)!.type).toBe('response.completed');
    expect(events.find((e) => e.type === 'response.output_item.added')?.item).toMatchObject({ type: 'reasoning' });
    // The reasoning summary streams part by part, as OpenAI's does.
    expect(events.filter((e) => e.type.startsWith('response.reasoning_summary_')).map((e) => e.type)).toEqual(expect.arrayContaining(['response.reasoning_summary_part.added', 'response.reasoning_summary_text.delta', 'response.reasoning_summary_text.done', 'response.reasoning_summary_part.done']));
    expect(events[0]!.response).toMatchObject({ id: final.id, store: true, provider: 'openai' });
    expect(final.output[0]).toMatchObject({ type: 'reasoning', summary: [{ type: 'summary_text' }] });
    expect(final as unknown as Loose).toMatchObject({ usage: { cost: expect.any(Number) }, provider: 'openai' });
    expect(final.output_text).toMatch(/^Hello from the sandbox model /);
  });

  it('names what only OpenAI\'s wire carries as dropped when another wire serves', async () => {
    const { data, response } = await sdk.responses.create({ model: 'anthropic/claude-3-5-haiku-latest', input: 'Say hello', reasoning, include: ['reasoning.encrypted_content'], truncation: 'auto' }).withResponse();
    const sent = fixture.sandbox.received.at(-1)!;
    expect(sent.path).toBe('/anthropic/v1/messages');
    expect(JSON.stringify(sent.body)).not.toMatch(/reasoning|include|truncation/);
    expect(response.headers.get('x-gw-params-dropped')).toBe('reasoning,include,truncation');
    expect(data.output_text).toMatch(/^Hello from the sandbox model /);
  });

  it('fails over from OpenAI\'s Responses wire to a translated one before the first byte', async () => {
    const g = await startChatFixture();
    try {
      await g.connect('openai', { directives: 'status=503', name: 'down openai' });
      await g.connect('anthropic', { name: 'up anthropic' });
      const client = new OpenAI({ apiKey: await g.key(), baseURL: `${g.api.url}/v1`, maxRetries: 0 });
      const final = await client.responses.stream({ model: 'openai/gpt-4o-mini', input: 'Say hello', fallbacks: ['anthropic/claude-3-5-haiku-latest'] } as unknown as OpenAI.Responses.ResponseCreateParamsStreaming).finalResponse();
      expect(final as unknown as Loose).toMatchObject({ provider: 'anthropic', route: 'standby_a' });
      expect(g.sandbox.received.map((r) => r.path)).toEqual(expect.arrayContaining(['/x/status=503/openai/v1/responses', '/anthropic/v1/messages']));
    } finally {
      await g.close();
    }
  });
});
