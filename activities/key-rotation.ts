import { and, eq, isNull, sql } from 'drizzle-orm';
import { appendAudit } from '../core/audit';
import { publishConfigChange } from '../core/cache/config-changes';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { gatewayKeys } from '../core/db/schema';
import type { RedisHandle } from '../core/redis';

export type KeyRotationDeps = { db: Database; redis: RedisHandle; clock: Clock };

export function createKeyRotationActivities(deps: KeyRotationDeps) {
  return {
    /**
     * Revokes a rotated key at the end of its overlap. Idempotent: an already revoked key is
     * left alone. Only a key that has a successor is revoked, so a rotation whose transaction
     * never committed (the workflow is started just before the commit) revokes nothing.
     */
    async revokeRotatedKey(input: { orgId: string; keyId: string }): Promise<{ revoked: boolean }> {
      const now = deps.clock.now();
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
      return { revoked };
    },
  };
}

export type KeyRotationActivities = ReturnType<typeof createKeyRotationActivities>;
