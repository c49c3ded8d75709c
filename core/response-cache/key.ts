import { createHash } from 'node:crypto';

/** Fields that change how an answer is delivered or recorded, not what it says. */
const NOT_IN_KEY = new Set(['stream', 'stream_options']);

/**
 * JSON with object keys sorted at every depth, so the same request written in another key
 * order finds the same entry. The cache key only needs to be deterministic for this code, so
 * this is not RFC 8785 (whose one npm implementation is ES-module only; docs/decisions.md).
 */
export function stableJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  const entries = Object.keys(value as Record<string, unknown>)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/**
 * The Redis key of an answer: a SHA-256 of what determines it (the model or route named,
 * messages, sampling and output parameters, tools, response format: the body the provider is
 * sent, less `stream` and `stream_options`), under the organization and namespace. Never the
 * payload itself.
 */
export function responseCacheKey(orgId: string, namespace: string, body: Record<string, unknown>): string {
  const hash = createHash('sha256');
  for (const k of Object.keys(body).sort()) {
    if (NOT_IN_KEY.has(k) || body[k] === undefined) continue;
    hash.update(JSON.stringify(k)).update(':').update(stableJson(body[k])).update(',');
  }
  return `rc:{${orgId}}:${namespace}:${hash.digest('hex')}`;
}
