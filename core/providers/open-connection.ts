import type { Sealer } from '../crypto/sealing';
import type { providerConnections } from '../db/schema';
import { kindSpec, type ProviderKind } from './kinds';

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
 * no secrets: callers treat it as unusable, and nothing is ever sent with an empty key.
 */
export function openConnection(row: ConnectionRow, sealer: Sealer): OpenedConnection {
  const bind = (field: string) => ({ orgId: row.orgId, recordId: row.id, field });
  const baseUrl = connectionBaseUrl(row.kind as ProviderKind, row.config);
  if (row.secretSealed === null) return { baseUrl, secrets: [] };
  const fallbacks = row.fallbackSecretsSealed ? (JSON.parse(sealer.open(row.fallbackSecretsSealed, bind('fallback_secrets'))) as string[]) : [];
  return { baseUrl, secrets: [sealer.open(row.secretSealed, bind('secret')), ...fallbacks] };
}
