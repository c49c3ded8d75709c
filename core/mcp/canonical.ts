import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { McpToolDefinition } from '../db/schema';

/**
 * The definition of a listed tool as we store, hash, approve and serve it: the MCP `Tool` object
 * the server listed, without `_meta` (transport extras that say nothing about what the tool does).
 * `name`, `title`, `description`, `inputSchema`, `outputSchema`, `annotations` and any other
 * field the server sends are kept, so any change to them moves the hash.
 */
export function toolDefinition(listed: Record<string, unknown> & { name: string }): McpToolDefinition {
  const { _meta: _ignored, ...definition } = listed;
  return definition as McpToolDefinition;
}

/**
 * The canonical JSON of a definition: RFC 8785 (JSON Canonicalization Scheme), by the maintained
 * `canonicalize` package: object keys sorted by UTF-16 code units, no whitespace, ECMAScript
 * number form, minimal string escapes.
 */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value has no JSON form');
  return text;
}

/** `definition_sha256`: lowercase hex SHA-256 of the UTF-8 bytes of the definition's canonical JSON. */
export function definitionSha256(definition: McpToolDefinition): string {
  return createHash('sha256').update(canonicalJson(definition), 'utf8').digest('hex');
}
