import { bodyLimitFor, DEFAULT_BODY_LIMIT } from '../../api/middleware/body';

/** Spec 8's body limits; the other client protocols carry chat's prompts, so chat's limit (issue 35). */
describe('request body limits per endpoint', () => {
  it('gives Anthropic Messages (and counting their tokens) and OpenAI Responses the chat limit; an unlisted path 1 MB', () => {
    const chat = bodyLimitFor('/v1/chat/completions');
    expect(chat).toBe(28_000_000);
    expect(bodyLimitFor('/v1/messages')).toBe(chat);
    expect(bodyLimitFor('/v1/responses/')).toBe(chat);
    expect(bodyLimitFor('/v1/messages/count_tokens')).toBe(chat);
    expect(bodyLimitFor('/v1/key')).toBe(DEFAULT_BODY_LIMIT);
  });

  it('takes 8 MB of embeddings inputs', () => {
    expect(bodyLimitFor('/v1/embeddings')).toBe(8_000_000);
  });
});
