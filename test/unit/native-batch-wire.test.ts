import { anthropicRequest, lineOfCustomId, nativeBatchWire, nativeResult, nativeStatus, openAIInputLine } from '../../core/batches/native-wire';

/** The providers' batch wires as data (core/batches/native-wire.ts), on fixtures in each provider's documented shapes. */
describe('native batch wires', () => {
  it('sends chat and embeddings batches to OpenAI and Azure, Messages batches to Anthropic, and nothing else', () => {
    expect(nativeBatchWire('openai', '/v1/chat/completions')).toBe('openai');
    expect(nativeBatchWire('azure_openai', '/v1/chat/completions')).toBe('openai');
    expect(nativeBatchWire('anthropic', '/v1/messages')).toBe('anthropic');
    expect(nativeBatchWire('openai', '/v1/embeddings')).toBe('openai');
    expect(nativeBatchWire('openai', '/v1/responses')).toBeNull();
    expect(nativeBatchWire('anthropic', '/v1/chat/completions')).toBeNull();
    expect(nativeBatchWire('groq', '/v1/chat/completions')).toBeNull();
  });

  it('submits each item under its line, with the model the connection knows and no stream', () => {
    expect(JSON.parse(openAIInputLine(7, { model: 'gpt-4o-mini', stream: false, stream_options: { include_usage: true }, messages: [] }, 'prod-mini', '/v1/chat/completions', true))).toEqual({
      custom_id: 'l7', method: 'POST', url: '/chat/completions', body: { model: 'prod-mini', messages: [] },
    });
    expect(JSON.parse(openAIInputLine(1, { model: 'route-x', messages: [] }, 'gpt-4o', '/v1/chat/completions', false)).url).toBe('/v1/chat/completions');
    expect(JSON.parse(openAIInputLine(2, { model: 'e', input: ['a'] }, 'text-embedding-3-small', '/v1/embeddings', false)).url).toBe('/v1/embeddings');
    expect(JSON.parse(openAIInputLine(2, { model: 'e', input: ['a'] }, 'emb-deployment', '/v1/embeddings', true)).url).toBe('/embeddings');
    expect(anthropicRequest(3, { model: 'claude', max_tokens: 5, messages: [] }, 'claude-sonnet-4-5')).toEqual({ custom_id: 'l3', params: { model: 'claude-sonnet-4-5', max_tokens: 5, messages: [] } });
  });

  it('never sends the gateway\'s own fields; a Messages request keeps Anthropic\'s metadata', () => {
    const body = { model: 'x', messages: [], routing: { providers: { deny: ['openai'] } }, fallbacks: ['a/b'], logging: false, cache: { ttl: 60 }, metadata: { user_id: 'u' }, temperature: 0 };
    expect(JSON.parse(openAIInputLine(1, body, 'gpt-4o', '/v1/chat/completions', false)).body).toEqual({ model: 'gpt-4o', messages: [], temperature: 0 });
    expect(anthropicRequest(1, body, 'claude').params).toEqual({ model: 'claude', messages: [], metadata: { user_id: 'u' }, temperature: 0 });
  });

  it('maps a custom_id back only when it is one we sent', () => {
    expect(lineOfCustomId('l12')).toBe(12);
    expect(lineOfCustomId('l0')).toBeNull();
    expect(lineOfCustomId('l1x')).toBeNull();
    expect(lineOfCustomId('client-id')).toBeNull();
    expect(lineOfCustomId(12)).toBeNull();
  });

  it('reads OpenAI batch objects: running, ended, failed with its reasons', () => {
    expect(nativeStatus('openai', { id: 'batch_1', status: 'in_progress', request_counts: { total: 10, completed: 3, failed: 1 }, output_file_id: null, error_file_id: null })).toEqual({
      ended: false, status: 'in_progress', done: 4, outputFileId: null, errorFileId: null, resultsUrl: null, failure: null,
    });
    expect(nativeStatus('openai', { status: 'completed', request_counts: { total: 2, completed: 2, failed: 0 }, output_file_id: 'file-o', error_file_id: null })).toMatchObject({ ended: true, outputFileId: 'file-o' });
    expect(nativeStatus('openai', { status: 'cancelling' }).ended).toBe(false);
    expect(nativeStatus('openai', { status: 'failed', errors: { object: 'list', data: [{ code: 'invalid_json_line', message: 'Line 2 is not valid JSON', line: 2 }] } })).toMatchObject({ ended: true, failure: 'Line 2 is not valid JSON' });
    expect(nativeStatus('openai', { status: 'failed' }).failure).toBe('the provider failed the batch');
  });

  it('reads Anthropic message batches: ended only when processing ended', () => {
    const running = { id: 'msgbatch_1', type: 'message_batch', processing_status: 'canceling', request_counts: { processing: 3, succeeded: 1, errored: 1, canceled: 0, expired: 0 }, results_url: null };
    expect(nativeStatus('anthropic', running)).toMatchObject({ ended: false, done: 2, resultsUrl: null });
    expect(nativeStatus('anthropic', { ...running, processing_status: 'ended', results_url: 'https://api.anthropic.com/v1/messages/batches/msgbatch_1/results' })).toMatchObject({ ended: true, resultsUrl: 'https://api.anthropic.com/v1/messages/batches/msgbatch_1/results' });
    expect(nativeStatus('anthropic', 'not an object')).toMatchObject({ ended: false });
  });

  it('reads OpenAI result lines: answers (2xx or not) and requests never run', () => {
    const ok = JSON.stringify({ id: 'batch_req_1', custom_id: 'l4', response: { status_code: 200, request_id: 'r', body: { id: 'chatcmpl', usage: { prompt_tokens: 3 } } }, error: null });
    expect(nativeResult('openai', ok)).toEqual({ line: 4, answered: true, status: 200, body: { id: 'chatcmpl', usage: { prompt_tokens: 3 } } });
    const refused = JSON.stringify({ custom_id: 'l5', response: { status_code: 400, body: { error: { message: 'bad', type: 'invalid_request_error' } } }, error: null });
    expect(nativeResult('openai', refused)).toMatchObject({ line: 5, answered: true, status: 400 });
    expect(nativeResult('openai', JSON.stringify({ custom_id: 'l6', response: null, error: { code: 'batch_expired', message: 'x' } }))).toEqual({ line: 6, answered: false, unrun: 'expired' });
    expect(nativeResult('openai', JSON.stringify({ custom_id: 'l7', response: null, error: { code: 'batch_cancelled', message: 'x' } }))).toEqual({ line: 7, answered: false, unrun: 'cancelled' });
    expect(nativeResult('openai', '')).toBeNull();
    expect(nativeResult('openai', '{not json')).toBeNull();
    expect(nativeResult('openai', JSON.stringify({ custom_id: 'someone-else', response: null }))).toBeNull();
  });

  it('reads Anthropic result lines, an errored request with the HTTP status of its error type', () => {
    expect(nativeResult('anthropic', JSON.stringify({ custom_id: 'l1', result: { type: 'succeeded', message: { id: 'msg', type: 'message' } } }))).toEqual({ line: 1, answered: true, status: 200, body: { id: 'msg', type: 'message' } });
    const errored = { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' } };
    expect(nativeResult('anthropic', JSON.stringify({ custom_id: 'l2', result: { type: 'errored', error: errored } }))).toEqual({ line: 2, answered: true, status: 400, body: errored });
    expect(nativeResult('anthropic', JSON.stringify({ custom_id: 'l3', result: { type: 'errored', error: { type: 'error', error: { type: 'overloaded_error', message: 'x' } } } }))).toMatchObject({ status: 529 });
    expect(nativeResult('anthropic', JSON.stringify({ custom_id: 'l4', result: { type: 'canceled' } }))).toEqual({ line: 4, answered: false, unrun: 'cancelled' });
    expect(nativeResult('anthropic', JSON.stringify({ custom_id: 'l5', result: { type: 'expired' } }))).toEqual({ line: 5, answered: false, unrun: 'expired' });
  });
});
