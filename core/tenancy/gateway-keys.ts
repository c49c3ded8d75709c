import type { Executor } from '../db/client';
import { gatewayKeys, projects } from '../db/schema';
import { DISPLAY_PREFIX_LENGTH, GATEWAY_KEY_PREFIX } from '../auth/credentials';
import { newSecret, sha256Hex } from '../crypto/secrets';
import { newId } from '../ids';

export async function createProject(db: Executor, input: { orgId: string; name: string; slug?: string }): Promise<string> {
  const id = newId('proj');
  await db.insert(projects).values({ id, orgId: input.orgId, name: input.name, slug: input.slug ?? id });
  return id;
}

export type IssueKeyInput = Omit<typeof gatewayKeys.$inferInsert, 'id' | 'secretHash' | 'secretPrefix' | 'lineageId'> & {
  lineageId?: string;
};

/** Returns the secret once; only its SHA-256 is stored. A new key starts its own lineage. */
export async function issueGatewayKey(db: Executor, input: IssueKeyInput): Promise<{ id: string; secret: string }> {
  const id = newId('key');
  const secret = newSecret(GATEWAY_KEY_PREFIX);
  await db.insert(gatewayKeys).values({
    ...input,
    id,
    secretHash: sha256Hex(secret),
    secretPrefix: secret.slice(0, DISPLAY_PREFIX_LENGTH),
    lineageId: input.lineageId ?? id,
  });
  return { id, secret };
}
