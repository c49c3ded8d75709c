import { and, eq, isNull } from 'drizzle-orm';
import type { Sealer } from '../crypto/sealing';
import type { Executor } from '../db/client';
import { webhookEndpoints } from '../db/schema';

type EndpointSecrets = Pick<typeof webhookEndpoints.$inferSelect, 'id' | 'orgId' | 'secretSealed' | 'retiredSecrets'>;

function openSecrets(sealer: Sealer, endpoint: EndpointSecrets, now: Date): { current: string; retired: string[] } {
  const open = (sealed: string) => sealer.open(sealed, { orgId: endpoint.orgId, recordId: endpoint.id, field: 'secret' });
  return {
    current: open(endpoint.secretSealed),
    // A rotated-out secret keeps signing until its time is up (spec 6.3), even before the
    // `secretRotation` workflow drops it.
    retired: endpoint.retiredSecrets.filter((s) => Date.parse(s.expires_at) > now.getTime()).map((s) => open(s.sealed)),
  };
}

/**
 * The secrets a delivery is signed with, current first: its endpoint's current and still-signing
 * retired secrets; for a per-request URL, those of every active console endpoint (none means
 * the delivery goes unsigned). Null when the delivery's endpoint no longer exists.
 */
export async function signingSecrets(db: Executor, sealer: Sealer, delivery: { orgId: string; endpointId: string | null }, now: Date): Promise<string[] | null> {
  const rows = await db.select().from(webhookEndpoints).where(and(
    eq(webhookEndpoints.orgId, delivery.orgId),
    isNull(webhookEndpoints.deletedAt),
    delivery.endpointId ? eq(webhookEndpoints.id, delivery.endpointId) : undefined,
  )).orderBy(webhookEndpoints.createdAt, webhookEndpoints.id);
  if (delivery.endpointId && rows.length === 0) return null;
  const opened = rows.map((r) => openSecrets(sealer, r, now));
  return [...opened.map((o) => o.current), ...opened.flatMap((o) => o.retired)];
}
