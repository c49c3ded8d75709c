import { and, eq, type AnyColumn, type SQL } from 'drizzle-orm';
import type { KeyContext } from './gateway-key-auth';

/**
 * Whose history a gateway key reads, one meaning for its jobs, request log and usage (spec 2.6
 * `observability_access`, 4.2 rule 1; issue 20): `organization` reads the whole organization;
 * any other key reads its own lineage, the key and the keys rotated from or into it
 * (`lineageId`), so a rotated key keeps what it made. `none` keeps that reach for its jobs
 * (a key must poll what it submitted) while the request log and usage refuse it outright.
 */
export type KeyReach = { orgId: string; lineageId: string | null };

export function keyReach(key: Pick<KeyContext, 'orgId' | 'lineageId' | 'observabilityAccess'>): KeyReach {
  return { orgId: key.orgId, lineageId: key.observabilityAccess === 'organization' ? null : key.lineageId };
}

/** The rows of a table within a key's reach: its organization's, and its lineage's unless it reads the organization. */
export function withinReach(key: Pick<KeyContext, 'orgId' | 'lineageId' | 'observabilityAccess'>, columns: { orgId: AnyColumn; lineageId: AnyColumn }): SQL {
  const reach = keyReach(key);
  return and(eq(columns.orgId, reach.orgId), reach.lineageId === null ? undefined : eq(columns.lineageId, reach.lineageId))!;
}
