import { eq } from 'drizzle-orm';
import type { Database } from '../db/client';
import { managementTokens, members, organizations, type MemberRole, type Plan } from '../db/schema';

/** Who is calling the management API, with the creator's *current* role (spec 5.6). */
export type ManagementPrincipal = {
  tokenId: string;
  orgId: string;
  plan: Plan;
  scopes: string[];
  projectIds: string[] | null;
  memberId: string;
  role: MemberRole;
};

export type TokenLookup =
  | { status: 'ok'; principal: ManagementPrincipal }
  | { status: 'unknown' | 'revoked' | 'expired' };

/** Management calls are not the hot path: one indexed read per request keeps revocation instant. */
export async function lookupManagementToken(db: Database, tokenHash: string, now: Date): Promise<TokenLookup> {
  const rows = await db
    .select({ token: managementTokens, role: members.role, plan: organizations.plan })
    .from(managementTokens)
    .innerJoin(members, eq(members.id, managementTokens.createdByMemberId))
    .innerJoin(organizations, eq(organizations.id, managementTokens.orgId))
    .where(eq(managementTokens.tokenHash, tokenHash))
    .limit(1);
  const row = rows[0];
  if (!row) return { status: 'unknown' };
  const { token } = row;
  if (token.revokedAt) return { status: 'revoked' };
  if (token.expiresAt && token.expiresAt.getTime() <= now.getTime()) return { status: 'expired' };
  return {
    status: 'ok',
    principal: {
      tokenId: token.id,
      orgId: token.orgId,
      plan: row.plan,
      scopes: token.scopes,
      projectIds: token.projectIds,
      memberId: token.createdByMemberId,
      role: row.role,
    },
  };
}
