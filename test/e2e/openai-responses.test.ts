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

  it('keeps nothing with store: false', async () => {
    const res = await sdk.responses.create({ model, input: 'Say hello', store: false });
    expect((res as unknown as Loose).store).toBe(false);
    await expect(sdk.responses.retrieve(res.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});
