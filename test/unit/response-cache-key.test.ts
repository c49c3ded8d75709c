import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { responseCacheKey } from '../../core/response-cache/key';

/**
 * The response cache's key is written with `canonicalize` (RFC 8785) since issue 53; before, with
 * a sorted-key JSON writer of its own. Entries stored under the old keys must still be found
 * after an upgrade: the keys below were recorded with the old writer before the change, and the
 * old writer is kept here as the reference the new one must match on any JSON value.
 */

/** The writer the key used before issue 53, as it was. */
function stableJsonBefore(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(stableJsonBefore).join(',')}]`;
  const entries = Object.keys(value as Record<string, unknown>)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stableJsonBefore((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/** The key as it was computed before issue 53. */
function keyBefore(orgId: string, namespace: string, body: Record<string, unknown>): string {
  const hash = createHash('sha256');
  for (const k of Object.keys(body).sort()) {
    if (k === 'stream' || k === 'stream_options' || body[k] === undefined) continue;
    hash.update(JSON.stringify(k)).update(':').update(stableJsonBefore(body[k])).update(',');
  }
  return `rc:{${orgId}}:${namespace}:${hash.digest('hex')}`;
}

/** Requests of each kind the cache serves, with what makes JSON texts differ: escapes, non-ASCII keys and text, number forms, nulls, empty containers. */
const REQUESTS: Array<[org: string, namespace: string, body: Record<string, unknown>, recorded: string]> = [
  ['org_1', 'default', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] }, 'rc:{org_1}:default:0d4a07c33b8fec4b02cc05bc811c1a7220c2223f4dcc54c42f60af0989388ed4'],
  ['org_1', 'default', { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }], stream: true, stream_options: { include_usage: true } }, 'rc:{org_1}:default:0d4a07c33b8fec4b02cc05bc811c1a7220c2223f4dcc54c42f60af0989388ed4'],
  ['org_2', 'team-a', {
    model: 'support-route', temperature: 0.2, top_p: 1, max_tokens: 512, seed: 42, n: 1, presence_penalty: -0.5, frequency_penalty: 0, stop: ['\n\n', 'END'], user: undefined,
    messages: [
      { role: 'system', content: 'You answer in JSON. Quote "exactly"; tabs\tand\nnewlines, backslash \\ and </script>.' },
      { role: 'user', content: [{ type: 'text', text: 'Café, 東京, emoji 😀, line sep \u2028, nul \u0000, bell \u0007, lone \ud800' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'low' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"result": [1, 2.5, -3, 1e21, 1e-7]}' },
    ],
    tools: [{ type: 'function', function: { name: 'lookup', description: 'Find a thing', parameters: { type: 'object', properties: { q: { type: 'string', minLength: 1 }, limit: { type: 'integer', maximum: 9007199254740991 } }, required: ['q'], additionalProperties: false } } }],
    tool_choice: 'auto',
    response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema: { type: 'object', properties: { 'é': { type: 'number' }, z: { type: 'string' }, Z: { type: 'string' }, '😀': { type: 'boolean' }, '\uffff': { type: 'null' }, 'a"b': { const: -0 }, 'x\ny': { enum: [0.1, 100, 1e21, 1.5e-10, -1e-7, 123456789012345680000] } } } } },
    logit_bias: { '50256': -100, '1000': 5 },
    metadata_empty: {}, empty_list: [], flags: [true, false, null],
  }, 'rc:{org_2}:team-a:31723f31c36fee7dd024e016f66f970362db59687f346a5d48bb34d1d2e6c2bf'],
  ['org_3', 'default', { endpoint: 'embeddings', model: 'openai/text-embedding-3-small', input: ['first text', 'second'], dimensions: 256, encoding_format: 'float' }, 'rc:{org_3}:default:c3ef8cfcaef53e22a633b2b80c27246766f4d326ed023fcb480d069f4a97f22f'],
  ['org_3', 'default', { endpoint: 'embeddings', model: 'openai/text-embedding-3-small', input: [[1, 2, 3, 50256], [100257]], dimensions: undefined }, 'rc:{org_3}:default:27d0bfed36e614ab9ef78a2c4f78e3004f5891d46a24310dd450a7c0254072a8'],
  ['org_4', 'img', { endpoint: 'images.generations', model: 'openai/dall-e-3', prompt: 'A lighthouse at dusk', size: '1024x1024', n: 1, quality: 'hd', style: 'vivid', response_format: 'b64_json' }, 'rc:{org_4}:img:c5c429d2162e8a8dc05b3b06e37a0310551d9a1418400324abf0c0e9737a8f9f'],
  ['org_5', 'default', { model: 'anthropic/claude-sonnet-4', max_tokens: 1024, messages: [{ role: 'user', content: 'Ünïcödé ﬁ ligature and \u00e9 vs e\u0301' }], reasoning_effort: 'low', parallel_tool_calls: false }, 'rc:{org_5}:default:07624f91093eb9f989b4051958ae61f35c15d05db81cc1e9486a01d990a7702e'],
];

describe('response cache key: canonical JSON (RFC 8785) without changing a key', () => {
  it('gives each request the key recorded before the change', () => {
    expect(REQUESTS.map(([org, namespace, body]) => responseCacheKey(org, namespace, body))).toEqual(REQUESTS.map(([, , , recorded]) => recorded));
    // The reference is the writer those keys were recorded with.
    expect(REQUESTS.map(([org, namespace, body]) => keyBefore(org, namespace, body))).toEqual(REQUESTS.map(([, , , recorded]) => recorded));
  });

  it('writes the text the old writer wrote for numbers, escapes and key orders where JSON texts can differ', () => {
    const values: unknown[] = [
      0, -0, 1, -1, 0.1, 1e21, 1e-7, 1.5e-10, 123456789012345680000, 2 ** 53, Number.MAX_VALUE, Number.MIN_VALUE, -1e-300,
      '', '"', '\\', '\n\r\t\b\f', '\u0000\u001f\u007f', '\u2028\u2029', 'é', 'e\u0301', '😀', '\ud800', '\udfff', '</script>',
      { b: 1, a: 2, A: 3, _: 4, '': 5, 'é': 6, '😀': 7, '\uffff': 8, '10': 9, '9': 10, 'a"b': 11 },
      { nested: { z: [{ y: null, x: undefined }], a: {} }, list: [undefined, null, [], {}] },
      [true, false, null, 'x', 1.25],
    ];
    for (const value of values) expect([value, canonicalize(value)]).toEqual([value, stableJsonBefore(value)]);
  });

  it('matches the old writer on any JSON value, and the old key on any body', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => canonicalize(value) === stableJsonBefore(value)), { numRuns: 2000 });
    const body = fc.dictionary(fc.oneof(fc.string(), fc.constantFrom('model', 'messages', 'stream', 'stream_options', 'temperature')), fc.jsonValue());
    fc.assert(fc.property(fc.string(), body, (org, b) => responseCacheKey(org, 'ns', b) === keyBefore(org, 'ns', b)), { numRuns: 500 });
  });
});
