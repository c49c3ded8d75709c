import type { Sealer } from '../crypto/sealing';
import type { providerConnections } from '../db/schema';
import { isPrivateHost } from '../net/service-url';
import { kindSpec, type ProviderKind } from './kinds';
import { providerHostVerdict } from './provider-hosts';

type ConnectionRow = typeof providerConnections.$inferSelect;

/** A stored connection made usable: its credentials opened and where it is reached. */
export type OpenedConnection = { baseUrl: string; secrets: string[] };

/** Where a connection's requests go: `config.base_url`, else the kind's own. */
export function connectionBaseUrl(kind: ProviderKind, config: Record<string, unknown>): string {
  return typeof config.base_url === 'string' ? config.base_url.replace(/\/+$/, '') : (kindSpec(kind).defaultBaseUrl ?? '');
}

/**
 * The one place sealed credentials are opened: the secret first, then the pooled fallbacks.
 * A connection whose credential was cleared (moved to a host it was not given for) opens with
 * no secrets: callers treat it as unusable, and nothing is ever sent with an empty key. So does
 * a fixed-host kind whose base URL is on a public host the provider does not own (a row written
 * before management checked it, issue 20): its credential never leaves for that host. A private
 * host is left to the guarded dispatcher, which refuses it unless the deployment allows it.
 */
export function openConnection(row: ConnectionRow, sealer: Sealer): OpenedConnection {
  const bind = (field: string) => ({ orgId: row.orgId, recordId: row.id, field });
  const baseUrl = connectionBaseUrl(row.kind as ProviderKind, row.config);
  if (row.secretSealed === null || !credentialMayGo(row.kind as ProviderKind, baseUrl)) return { baseUrl, secrets: [] };
  const fallbacks = row.fallbackSecretsSealed ? (JSON.parse(sealer.open(row.fallbackSecretsSealed, bind('fallback_secrets'))) as string[]) : [];
  return { baseUrl, secrets: [sealer.open(row.secretSealed, bind('secret')), ...fallbacks] };
}

function credentialMayGo(kind: ProviderKind, baseUrl: string): boolean {
  let hostname: string;
  try {
    hostname = new URL(baseUrl).hostname;
  } catch {
    return false;
  }
  return providerHostVerdict(kind, hostname) === 'ok' || isPrivateHost(hostname);
}
