import { z } from 'zod';
import type { Sealer } from '../crypto/sealing';

/** Spec 2.6: up to 8 credential headers. */
export const MCP_MAX_CREDENTIAL_HEADERS = 8;

/** Header names we set ourselves or that would change how the request is framed or routed. */
const RESERVED_HEADERS = new Set([
  'host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer',
  'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'proxy-authorization', 'proxy-connection', 'cookie',
]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The write-only `credential` body field: `{type: 'none'}` or `{type: 'headers', headers}`. */
export const mcpCredentialSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('none') }),
  z.strictObject({ type: z.literal('headers'), headers: z.record(z.string(), z.string()) }),
]);
export type McpCredentialInput = z.infer<typeof mcpCredentialSchema>;

/** A credential checked: header names folded to lower case, values as given. */
export type CheckedCredential = { authType: 'none' | 'headers'; headers: Record<string, string> };

/** Why a credential is refused (`invalid_mcp_credential`), or the checked credential. */
export function checkCredential(input: McpCredentialInput): { ok: true; credential: CheckedCredential } | { ok: false; reason: string } {
  if (input.type === 'none') return { ok: true, credential: { authType: 'none', headers: {} } };
  const entries = Object.entries(input.headers);
  if (entries.length === 0) return { ok: false, reason: 'a `headers` credential needs at least one header' };
  if (entries.length > MCP_MAX_CREDENTIAL_HEADERS) return { ok: false, reason: `at most ${MCP_MAX_CREDENTIAL_HEADERS} headers` };
  const headers: Record<string, string> = {};
  for (const [rawName, value] of entries) {
    const name = rawName.toLowerCase();
    if (!TOKEN.test(rawName) || rawName.length > 100) return { ok: false, reason: 'a header name is not a valid HTTP header name' };
    if (RESERVED_HEADERS.has(name)) return { ok: false, reason: `header \`${name}\` is set by the gateway and cannot be a credential` };
    if (name in headers) return { ok: false, reason: `header \`${name}\` is given twice` };
    if (value.length === 0 || value.length > 8192 || /[\r\n\0]/.test(value)) return { ok: false, reason: `the value of \`${name}\` must be 1 to 8192 characters with no line breaks` };
    headers[name] = value;
  }
  return { ok: true, credential: { authType: 'headers', headers } };
}

const binding = (server: { orgId: string; id: string }) => ({ orgId: server.orgId, recordId: server.id, field: 'credential' });

/** The columns a checked credential is stored as: sealed values, plain names. */
export function sealServerCredential(sealer: Sealer, server: { orgId: string; id: string }, credential: CheckedCredential) {
  return {
    authType: credential.authType,
    headerNames: Object.keys(credential.headers).sort(),
    credentialSealed: credential.authType === 'none' ? null : sealer.seal(JSON.stringify(credential.headers), binding(server)),
  };
}

/** The credential headers of a registered server, opened; empty for `{type: 'none'}`. */
export function openServerCredential(sealer: Sealer, server: { orgId: string; id: string; credentialSealed: string | null }): Record<string, string> {
  if (!server.credentialSealed) return {};
  return JSON.parse(sealer.open(server.credentialSealed, binding(server))) as Record<string, string>;
}
