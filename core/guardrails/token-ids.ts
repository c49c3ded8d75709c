import { GatewayError } from '../errors';

/**
 * Token-id input as guardrails read it (issue 52): an embeddings input may be token ids rather
 * than text, and a guardrail policy checks text, so the ids are decoded with the model's own
 * tokenizer first; where the gateway does not know that tokenizer, the request is refused
 * rather than sent unchecked. `gpt-tokenizer` (pure JavaScript, no download at install or run
 * time) holds OpenAI's encodings. An encoding is loaded by its first use, as re2js is
 * for user patterns: about 100 ms and 18 MB of heap for cl100k_base, paid only
 * by a process that receives token ids under a guardrail policy.
 */

/**
 * The encodings the gateway can decode, by their tiktoken names (the embedding table's
 * `tokenizer`): OpenAI's embedding models' one. Another is a module of the same package.
 */
export const TOKEN_ENCODINGS = ['cl100k_base'] as const;
export type TokenEncodingName = (typeof TOKEN_ENCODINGS)[number];

export function isTokenEncodingName(name: string): name is TokenEncodingName {
  return (TOKEN_ENCODINGS as readonly string[]).includes(name);
}

type Codec = { decode(ids: Iterable<number>): string; encode(text: string, options?: { disallowedSpecial?: Set<string> }): number[] };

const loaded = new Map<TokenEncodingName, Codec>();

function codec(name: TokenEncodingName): Codec {
  let found = loaded.get(name);
  if (!found) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
    found = require('gpt-tokenizer/encoding/cl100k_base') as Codec;
    loaded.set(name, found);
  }
  return found;
}

/**
 * The text of each input's token ids; a 400 naming the first id the encoding does not have
 * (the provider would refuse it too, and its text cannot be checked).
 */
export function decodeTokenInputs(name: TokenEncodingName, inputs: readonly (readonly number[])[]): string[] {
  const { decode } = codec(name);
  return inputs.map((ids, i) => {
    try {
      return decode(ids);
    } catch {
      const bad = ids.find((id) => {
        try {
          decode([id]);
          return false;
        } catch {
          return true;
        }
      });
      throw new GatewayError('invalid_request', `\`input[${i}]\` holds token id ${bad}, which is not a ${name} token.`);
    }
  });
}

/**
 * Text as token ids of the encoding: a redacted input, sent in the form the client chose. Every
 * character is read as text: special tokens' text (`<|endoftext|>`) becomes ordinary tokens, so
 * that a redaction never turns text the client sent as ordinary ids into a control token.
 */
export function encodeTokenInput(name: TokenEncodingName, text: string): number[] {
  return codec(name).encode(text, { disallowedSpecial: new Set() });
}
