import { ADAPTERS } from '../../core/providers/adapters';
import { nativeResponsesRequest, parseResponsesObject, responsesStreamDecoder } from '../../core/providers/adapters/openai-responses';
import { NATIVE_REQUEST, type ChatBody, type StreamOutput } from '../../core/providers/types';

/**
 * OpenAI's own Responses wire (issue 35) as pure transforms, on fixtures as OpenAI sends them:
 * the native request as sent, the response object and its stream events read into the chat
 * vocabulary, and which adapters take a Responses request as it came.
 */
const request = { model: 'openai/o3-mini', input: [{ type: 'message', role: 'user', content: 'hi' }], reasoning: { effort: 'low' }, include: ['reasoning.encrypted_content'], temperature: 0.2, stream: true };
const chatBody = (extra: Partial<ChatBody> = {}): ChatBody => ({ model: 'openai/o3-mini', messages: [{ role: 'user', content: 'hi' }], ...extra });

const RESPONSE = {
  id: 'resp_openai', object: 'response', model: 'o3-mini-2025-01-31', status: 'completed',
  output: [
    { type: 'reasoning', id: 'rs_1', summary: [] },
    { type: 'message', id: 'msg_1', role: 'assistant', content: [{ type: 'output_text', text: 'Hello ', annotations: [] }, { type: 'output_text', text: 'there', annotations: [] }] },
  ],
  usage: { input_tokens: 12, input_tokens_details: { cached_tokens: 4 }, output_tokens: 30, output_tokens_details: { reasoning_tokens: 20 }, total_tokens: 42 },
};

describe('the native Responses request', () => {
  it('takes the candidate\'s model and the held cap, drops what the chat body dropped, and is never kept by OpenAI', () => {
    const sent = nativeResponsesRequest(request, chatBody({ max_completion_tokens: 500 }), 'o3-mini', false);
    expect(sent).toEqual({ model: 'o3-mini', input: request.input, reasoning: { effort: 'low' }, include: ['reasoning.encrypted_content'], store: false, max_output_tokens: 500 });
    expect(nativeResponsesRequest(request, chatBody({ temperature: 0.2 }), 'o3-mini', true)).toMatchObject({ temperature: 0.2, stream: true });
  });

  it('goes to /responses from OpenAI\'s adapter only; every other sends its chat translation', () => {
    const body = chatBody();
    body[NATIVE_REQUEST] = { wire: 'openai-responses', body: request };
    const options = { model: 'o3-mini', stream: false, defaultMaxTokens: 1000, config: {} };
    expect(ADAPTERS.openai.buildRequest(body, options)).toMatchObject({ path: '/responses', body: { store: false, include: ['reasoning.encrypted_content'] } });
    expect(ADAPTERS.azure_openai.buildRequest(body, options).path).toMatch(/\/chat\/completions$/);
    expect(ADAPTERS.groq.buildRequest(body, options).path).toBe('/chat/completions');
    expect(ADAPTERS.anthropic.buildRequest(body, options).path).toBe('/messages');
    expect(ADAPTERS.openai.nativeWire).toBe('openai-responses');
    expect(ADAPTERS.azure_openai.nativeWire).toBeUndefined();
  });
});

describe('a response object read as a chat result', () => {
  it('joins the message text, keeps the object as native, maps usage with cached and reasoning tokens', () => {
    const result = ADAPTERS.openai.parseResponse(RESPONSE, { native: true });
    expect(result).toEqual({
      native: RESPONSE,
      model: 'o3-mini-2025-01-31',
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 20 } },
    });
  });

  it('reads function calls as tool calls, and an incomplete response as cut by length or the content filter', () => {
    const calls = parseResponsesObject({ status: 'completed', output: [{ type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'lookup', arguments: '{"q":1}' }] });
    expect(calls.choices[0]).toEqual({ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":1}' } }] }, finish_reason: 'tool_calls' });
    expect(parseResponsesObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output: [] }).choices[0]!.finish_reason).toBe('length');
    expect(parseResponsesObject({ status: 'incomplete', incomplete_details: { reason: 'content_filter' }, output: [] }).choices[0]!.finish_reason).toBe('content_filter');
    expect(parseResponsesObject({ output: [] }).usage).toBeNull();
  });
});

describe('Responses stream events read as chat outputs', () => {
  const run = (events: Array<Record<string, unknown>>) => {
    const decode = responsesStreamDecoder();
    return events.map((e) => decode({ event: String(e.type), data: JSON.stringify(e) }));
  };

  it('passes each event along first, then its translation: text, a function call, the end with usage', () => {
    const out = run([
      { type: 'response.created', sequence_number: 0, response: { model: 'o3-mini', status: 'in_progress' } },
      { type: 'response.output_item.added', output_index: 0, item: { type: 'reasoning', id: 'rs_1' } },
      { type: 'response.output_text.delta', output_index: 1, delta: 'Hi' },
      { type: 'response.output_item.added', output_index: 2, item: { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'lookup' } },
      { type: 'response.function_call_arguments.delta', output_index: 2, delta: '{"q"' },
      { type: 'response.completed', response: { status: 'completed', usage: { input_tokens: 3, output_tokens: 5 } } },
    ]);
    expect(out.every((o) => o[0]!.type === 'native')).toBe(true);
    const translated = out.map((o) => o.slice(1));
    expect(translated[0]).toEqual([{ type: 'model', model: 'o3-mini' }, { type: 'delta', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }]);
    expect(translated[1]).toEqual([]);
    expect(translated[2]).toEqual([{ type: 'delta', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] }]);
    expect(translated[3]).toEqual([{ type: 'delta', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '' } }] }, finish_reason: null }] }]);
    expect(translated[4]).toEqual([{ type: 'delta', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"q"' } }] }, finish_reason: null }] }]);
    expect(translated[5]).toEqual<StreamOutput[]>([
      { type: 'delta', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { type: 'usage', usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } },
      { type: 'done' },
    ]);
  });

  it('reads response.failed and error events as failures', () => {
    const [failed, error] = run([
      { type: 'response.failed', response: { status: 'failed', error: { code: 'server_error', message: 'boom' } } },
      { type: 'error', code: 'rate_limit_exceeded', message: 'slow down' },
    ]);
    expect(failed![1]).toMatchObject({ type: 'error', failure: { kind: 'server_error' } });
    expect(error![1]).toMatchObject({ type: 'error' });
  });
});
