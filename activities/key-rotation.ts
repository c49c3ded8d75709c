import { and, eq, isNull, sql } from 'drizzle-orm';
import { appendAudit } from '../core/audit';
import { publishConfigChange } from '../core/cache/config-changes';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { gatewayKeys } from '../core/db/schema';
import type { RedisHandle } from '../core/redis';

export type KeyRotationDeps = { db: Database; redis: RedisHandle; clock: Clock };

/** `not_due`: the row's overlap ends later (`dueAt`); `not_rotated`: no successor (yet). */
export type RevocationOutcome = { state: 'revoked' | 'already_revoked' | 'not_rotated' } | { state: 'not_due'; dueAt: string };

export function createKeyRotationActivities(deps: KeyRotationDeps) {
  return {
    /**
     * Revokes a rotated key at the end of its overlap, as the key's row says it ends (its
     * `expires_at`), whatever time the workflow was started with. Idempotent: an already revoked
     * key is left alone. Only a key that has a successor is revoked: the workflow is started
     * before the rotation's transaction, which may not have committed yet, or ever.
     */
    async revokeRotatedKey(input: { orgId: string; keyId: string }): Promise<RevocationOutcome> {
      const now = deps.clock.now();
      const [key] = await deps.db.select({ revokedAt: gatewayKeys.revokedAt, expiresAt: gatewayKeys.expiresAt }).from(gatewayKeys)
        .where(and(eq(gatewayKeys.orgId, input.orgId), eq(gatewayKeys.id, input.keyId)));
      if (!key || key.revokedAt) return { state: 'already_revoked' };
      if (key.expiresAt && key.expiresAt > now) return { state: 'not_due', dueAt: key.expiresAt.toISOString() };
      const revoked = await deps.db.transaction(async (tx) => {
        const [row] = await tx
          .update(gatewayKeys)
          .set({ revokedAt: now, version: sql`${gatewayKeys.version} + 1`, updatedAt: now })
          .where(and(
            eq(gatewayKeys.orgId, input.orgId),
            eq(gatewayKeys.id, input.keyId),
            isNull(gatewayKeys.revokedAt),
            sql`exists (select 1 from ${gatewayKeys} successor where successor.rotated_from_key_id = ${gatewayKeys.id})`,
          ))
          .returning({ version: gatewayKeys.version });
        if (!row) return false;
        await appendAudit(tx, {
          orgId: input.orgId,
          actor: { tokenId: null, memberId: null },
          action: 'gateway_keys.rotation_ended',
          resourceType: 'gateway_keys',
          resourceId: input.keyId,
          beforeVersion: row.version - 1,
          afterVersion: row.version,
        });
        return true;
      });
      if (revoked) await publishConfigChange(deps.redis, { orgId: input.orgId, what: `gateway_keys:${input.keyId}` });
      return { state: revoked ? 'revoked' : 'not_rotated' };
    },
  };
}

export type KeyRotationActivities = ReturnType<typeof createKeyRotationActivities>;
