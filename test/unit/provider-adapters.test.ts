import { anthropicAdapter, toAnthropicMessages } from '../../core/providers/adapters/anthropic';
import { googleAdapter, toGeminiContents } from '../../core/providers/adapters/google';
import { azureOpenAiAdapter, openAiAdapter } from '../../core/providers/adapters/openai';
import { cleanProviderText, providerRejectedMessage } from '../../core/providers/errors';
import type { ChatBody, ChatMessage } from '../../core/providers/types';
import { chainPosition } from '../../core/routing/candidates';

const build = { model: 'm', stream: false, defaultMaxTokens: 4096, config: {} };

const conversation: ChatMessage[] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: [{ type: 'text', text: 'What is in this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"cat"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: 'a cat' },
];

describe('OpenAI wire adapter', () => {
  it('passes the body through with the upstream model, asks streams for usage, and addresses Azure deployments', () => {
    const body: ChatBody = { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], custom_field: 1 };
    expect(openAiAdapter.buildRequest(body, { ...build, stream: true })).toEqual({
      path: '/chat/completions',
      query: undefined,
      body: { model: 'm', messages: body.messages, custom_field: 1, stream: true, stream_options: { include_usage: true } },
    });
    expect(azureOpenAiAdapter.buildRequest(body, { ...build, model: 'my deploy', config: { api_version: '2025-01-01' } })).toMatchObject({ path: '/deployments/my%20deploy/chat/completions', query: { 'api-version': '2025-01-01' } });
  });

  it('maps usage with cached, reasoning and provider-reported cost', () => {
    const result = openAiAdapter.parseResponse({
      model: 'gpt-4o-2024', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 2 }, cost: 0.01 },
    });
    expect(result.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 2 }, provider_cost: 0.01 });
  });

  it('classifies failures into the spec\'s kinds', () => {
    expect(openAiAdapter.classifyError(429, { error: { message: 'slow down' } }, { 'retry-after': '12' })).toMatchObject({ kind: 'rate_limit', retryAfterSeconds: 12 });
    expect(openAiAdapter.classifyError(401, { error: { message: 'bad key' } }, {}).kind).toBe('credential');
    expect(openAiAdapter.classifyError(503, 'upstream down', {}).kind).toBe('server_error');
    expect(openAiAdapter.classifyError(400, { error: { message: 'flagged', code: 'content_filter' } }, {}).kind).toBe('moderation');
    expect(openAiAdapter.classifyError(400, { error: { message: "Unsupported parameter: 'top_p'", param: 'top_p', code: 'unsupported_parameter' } }, {})).toMatchObject({ kind: 'unsupported_parameter', param: 'top_p' });
    expect(openAiAdapter.classifyError(400, { error: { message: 'messages must not be empty' } }, {}).kind).toBe('invalid_request');
    expect(openAiAdapter.classifyError(404, { error: { message: 'model not found' } }, {}).kind).toBe('model_not_served');
  });

  it('decodes stream chunks, the usage chunk and [DONE]', () => {
    const decode = openAiAdapter.createStreamDecoder();
    expect(decode({ data: '{"model":"m","choices":[{"index":0,"delta":{"content":"He"},"finish_reason":null}]}' })).toEqual([
      { type: 'model', model: 'm' }, { type: 'delta', choices: [{ index: 0, delta: { content: 'He' }, finish_reason: null }] },
    ]);
    expect(decode({ data: '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}' })).toEqual([{ type: 'usage', usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } }]);
    expect(decode({ data: '[DONE]' })).toEqual([{ type: 'done' }]);
  });
});

describe('Anthropic adapter', () => {
  it('moves the system prompt apart, turns tool calls and results into blocks, requires max_tokens', () => {
    expect(toAnthropicMessages(conversation)).toEqual({
      system: 'Be brief.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'What is in this?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'lookup', input: { q: 'cat' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'a cat' }] },
      ],
    });
    const req = anthropicAdapter.buildRequest({ model: 'x', messages: conversation, tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }], tool_choice: 'required', seed: 1 }, build);
    expect(req.body).toMatchObject({ max_tokens: 4096, tool_choice: { type: 'any' }, tools: [{ name: 'lookup', input_schema: { type: 'object' } }] });
    expect(req.body).not.toHaveProperty('seed');
  });

  it('maps a tool_use answer and usage with cached reads', () => {
    const r = anthropicAdapter.parseResponse({
      model: 'claude', stop_reason: 'tool_use', content: [{ type: 'text', text: 'Looking.' }, { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'cat' } }],
      usage: { input_tokens: 10, cache_read_input_tokens: 5, output_tokens: 7 },
    });
    expect(r.choices[0]).toEqual({ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: 'Looking.', tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"cat"}' } }] } });
    expect(r.usage).toEqual({ prompt_tokens: 15, completion_tokens: 7, total_tokens: 22, prompt_tokens_details: { cached_tokens: 5 } });
  });

  it('decodes the Messages stream events', () => {
    const decode = anthropicAdapter.createStreamDecoder();
    const ev = (o: object) => decode({ data: JSON.stringify(o) });
    ev({ type: 'message_start', message: { model: 'claude', usage: { input_tokens: 3, output_tokens: 1 } } });
    expect(ev({ type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 't1', name: 'lookup', input: {} } })[0]).toMatchObject({ choices: [{ delta: { tool_calls: [{ index: 0, id: 't1', function: { name: 'lookup' } }] } }] });
    expect(ev({ type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"q"' } })[0]).toMatchObject({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '{"q"' } }] } }] });
    expect(ev({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9 } })).toEqual([
      { type: 'delta', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
      { type: 'usage', usage: { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 } },
    ]);
    expect(ev({ type: 'message_stop' })).toEqual([{ type: 'done' }]);
    expect(ev({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })[0]).toMatchObject({ type: 'error', failure: { kind: 'server_error' } });
  });
});

describe('Gemini adapter', () => {
  it('builds contents, systemInstruction, generationConfig and function declarations', () => {
    expect(toGeminiContents(conversation)).toEqual({
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
      contents: [
        { role: 'user', parts: [{ text: 'What is in this?' }, { inlineData: { mimeType: 'image/png', data: 'AAAA' } }] },
        { role: 'model', parts: [{ functionCall: { name: 'lookup', args: { q: 'cat' } } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'lookup', response: { content: 'a cat' } } }] },
      ],
    });
    const req = googleAdapter.buildRequest({ model: 'x', messages: conversation, temperature: 0.3, max_tokens: 99, stop: 'END', response_format: { type: 'json_object' } }, { ...build, stream: true });
    expect(req).toMatchObject({ path: '/models/m:streamGenerateContent', query: { alt: 'sse' }, body: { generationConfig: { temperature: 0.3, maxOutputTokens: 99, stopSequences: ['END'], responseMimeType: 'application/json' } } });
  });

  it('maps candidates, function calls, thoughts and safety stops', () => {
    const r = googleAdapter.parseResponse({
      candidates: [{ content: { parts: [{ text: 'thinking', thought: true }, { functionCall: { name: 'lookup', args: { q: 1 } } }] }, finishReason: 'STOP' }],
      usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 3, thoughtsTokenCount: 4, totalTokenCount: 12 },
    });
    expect(r.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null, tool_calls: [{ function: { name: 'lookup', arguments: '{"q":1}' } }] } });
    expect(r.usage).toEqual({ prompt_tokens: 5, completion_tokens: 7, total_tokens: 12, completion_tokens_details: { reasoning_tokens: 4 } });
    expect(googleAdapter.parseResponse({ candidates: [{ content: { parts: [] }, finishReason: 'SAFETY' }] }).choices[0]!.finish_reason).toBe('content_filter');
    expect(googleAdapter.classifyError(400, { error: { code: 400, message: 'API key not valid. Please pass a valid API key.', status: 'INVALID_ARGUMENT' } }, {}).kind).toBe('credential');
    expect(googleAdapter.classifyError(429, { error: { code: 429, status: 'RESOURCE_EXHAUSTED', message: 'quota' } }, {}).kind).toBe('rate_limit');
  });
});

describe('provider error text and chain positions', () => {
  it('cleans, redacts credential-like text and caps at 500 characters with the prefix', () => {
    expect(cleanProviderText('bad key sk-proj-abcdefghijklmnop\n\tsent with Bearer abc.def and api_key=xyz123')).toBe('bad key [redacted] sent with [redacted] and api_key=[redacted]');
    const long = providerRejectedMessage('x '.repeat(600));
    expect(long.length).toBe(500);
    expect(long.startsWith('Provider rejected the request: ')).toBe(true);
  });

  it('names chain positions primary, standby_a, standby_b ...', () => {
    expect([0, 1, 2, 26, 27].map(chainPosition)).toEqual(['primary', 'standby_a', 'standby_b', 'standby_z', 'standby_aa']);
  });
});
