import { decodeTokenInputs, encodeTokenInput } from '../../core/guardrails/token-ids';

/**
 * Token-id embeddings input under a guardrail policy (issue 52): decoded to be checked, and a
 * redacted input re-encoded in the same encoding.
 */
describe('token ids as guardrails read them', () => {
  it('decodes ids to their text, and refuses an id the encoding does not have, naming it', () => {
    expect(decodeTokenInputs('cl100k_base', [[9906, 1917]])).toEqual(['Hello world']);
    expect(() => decodeTokenInputs('cl100k_base', [[9906], [9906, 999_999_999]])).toThrow(/input\[1\].*999999999/);
  });

  it('re-encodes a special token\'s text as ordinary tokens: a redaction never makes a control token of what the client sent as text', () => {
    // `<|endoftext|>` sent as seven ordinary ids (not the special token 100257).
    const [text] = decodeTokenInputs('cl100k_base', [[27, 91, 8862, 728, 428, 91, 29]]);
    expect(text).toBe('<|endoftext|>');
    const ids = encodeTokenInput('cl100k_base', `${text} [REDACTED:EMAIL]`);
    expect(ids).not.toContain(100_257);
    expect(decodeTokenInputs('cl100k_base', [ids])).toEqual(['<|endoftext|> [REDACTED:EMAIL]']);
  });
});
