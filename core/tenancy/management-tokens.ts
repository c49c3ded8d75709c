import type { Executor } from '../db/client';
import { managementTokens } from '../db/schema';
import { DISPLAY_PREFIX_LENGTH, MANAGEMENT_TOKEN_PREFIX } from '../auth/credentials';
import { newSecret, sha256Hex } from '../crypto/secrets';
import { newId } from '../ids';

export type IssueTokenInput = {
  orgId: string;
  name: string;
  scopes: string[];
  createdByMemberId: string;
  projectIds?: string[] | null;
  expiresAt?: Date | null;
};

/** Returns the token once; only its hash is stored. */
export async function issueManagementToken(db: Executor, input: IssueTokenInput): Promise<{ id: string; token: string }> {
  const id = newId('mtok');
  const token = newSecret(MANAGEMENT_TOKEN_PREFIX);
  await db.insert(managementTokens).values({
    id,
    orgId: input.orgId,
    name: input.name,
    tokenHash: sha256Hex(token),
    tokenPrefix: token.slice(0, DISPLAY_PREFIX_LENGTH),
    scopes: input.scopes,
    projectIds: input.projectIds ?? null,
    createdByMemberId: input.createdByMemberId,
    expiresAt: input.expiresAt ?? null,
  });
  return { id, token };
}
