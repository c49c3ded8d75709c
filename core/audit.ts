import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from './db/client';
import { auditEvents, gatewayKeys } from './db/schema';
import { newId } from './ids';

export type AuditActor = { tokenId: string | null; memberId: string | null };

export type AuditEntry = {
  orgId: string;
  actor: AuditActor;
  action: string;
  resourceType: string;
  resourceId: string;
  beforeVersion: number | null;
  afterVersion: number | null;
  /**
   * The project the write concerns (a key, a project, a project's cap rule or guardrail policy),
   * null for an organization-level write; a project-restricted token reads only its projects'
   * rows. Left out, it is the key's project for a `gateway_keys` row (a workflow revoking a
   * rotated key knows only the key) and null otherwise.
   */
  projectId?: string | null;
  /** Only non-secret facts; callers never pass sealed fields or secrets. */
  detail?: Record<string, unknown>;
};

function projectOf(entry: AuditEntry): string | SQL | null {
  if (entry.projectId !== undefined) return entry.projectId;
  if (entry.resourceType === 'gateway_keys') return sql`(select ${gatewayKeys.projectId} from ${gatewayKeys} where ${gatewayKeys.id} = ${entry.resourceId})`;
  return null;
}

/** Appends an audit event in the caller's transaction, so a write and its audit land together. */
export async function appendAudit(db: Executor, entry: AuditEntry): Promise<void> {
  await db.insert(auditEvents).values({
    id: newId('aud'),
    orgId: entry.orgId,
    actorTokenId: entry.actor.tokenId,
    actorMemberId: entry.actor.memberId,
    action: entry.action,
    resourceType: entry.resourceType,
    resourceId: entry.resourceId,
    projectId: projectOf(entry),
    beforeVersion: entry.beforeVersion,
    afterVersion: entry.afterVersion,
    detail: entry.detail ?? null,
  });
}
