import { and, eq } from 'drizzle-orm';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { webhookEndpoints } from '../core/db/schema';

export type SecretRotationDeps = { db: Database; clock: Clock };

export function createSecretRotationActivities(deps: SecretRotationDeps) {
  return {
    /**
     * Drops the endpoint's retired signing secrets whose time is up and says when the next
     * one ends (null when none is left). Retired secrets are not part of the resource's
     * wire fields, so this does not move its version.
     */
    async dropRetiredSecrets(input: { orgId: string; endpointId: string }): Promise<{ dropped: number; nextRetireAt: string | null }> {
      const now = deps.clock.now().getTime();
      return deps.db.transaction(async (tx) => {
        const [row] = await tx
          .select({ retired: webhookEndpoints.retiredSecrets })
          .from(webhookEndpoints)
          .where(and(eq(webhookEndpoints.orgId, input.orgId), eq(webhookEndpoints.id, input.endpointId)))
          .for('update');
        if (!row) return { dropped: 0, nextRetireAt: null };
        const kept = row.retired.filter((s) => Date.parse(s.expires_at) > now);
        if (kept.length !== row.retired.length) {
          await tx.update(webhookEndpoints).set({ retiredSecrets: kept }).where(eq(webhookEndpoints.id, input.endpointId));
        }
        const next = kept.map((s) => s.expires_at).sort()[0] ?? null;
        return { dropped: row.retired.length - kept.length, nextRetireAt: next };
      });
    },
  };
}

export type SecretRotationActivities = ReturnType<typeof createSecretRotationActivities>;
