import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/** Fields that change how an answer is delivered or recorded, not what it says. */
const NOT_IN_KEY = new Set(['stream', 'stream_options']);

/**
 * The Redis key of an answer: a SHA-256 of what determines it (the model or route named,
 * messages, sampling and output parameters, tools, response format: the body the provider is
 * sent, less `stream` and `stream_options`), under the organization and namespace. Never the
 * payload itself.
 *
 * Each field's value is its RFC 8785 canonical JSON (`canonicalize`, as MCP definitions are
 * hashed): keys sorted at every depth, so the same request written in another key order finds
 * the same entry. For JSON input that is the text the sorted-key writer this replaced made, so
 * keys stored before stay found (test/unit/response-cache-key.test.ts). A value with no JSON
 * form (none that a parsed body holds) is written `null`, as before.
 */
export function responseCacheKey(orgId: string, namespace: string, body: Record<string, unknown>): string {
  const hash = createHash('sha256');
  for (const k of Object.keys(body).sort()) {
    if (NOT_IN_KEY.has(k) || body[k] === undefined) continue;
    hash.update(JSON.stringify(k)).update(':').update(canonicalize(body[k]) ?? 'null').update(',');
  }
  return `rc:{${orgId}}:${namespace}:${hash.digest('hex')}`;
}
