import type { Executor } from './db/client';
import { auditEvents } from './db/schema';
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
  /** Only non-secret facts; callers never pass sealed fields or secrets. */
  detail?: Record<string, unknown>;
};

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
    beforeVersion: entry.beforeVersion,
    afterVersion: entry.afterVersion,
    detail: entry.detail ?? null,
  });
}
