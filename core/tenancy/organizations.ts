import { asc, eq, gt } from 'drizzle-orm';
import type { Database, Executor } from '../db/client';
import { DEFAULT_ENVIRONMENTS, environments, members, organizations, type MemberRole, type Plan } from '../db/schema';
import { newId } from '../ids';
import { issueManagementToken } from './management-tokens';

export type BootstrapResult = { org_id: string; member_id: string; management_token: string };

/**
 * A new organization with the three default environments, its owner and a management token
 * holding every scope. Each call makes a new organization (names need not be unique).
 */
export async function bootstrapOrganization(
  db: Database,
  input: { name: string; plan?: Plan; email?: string },
): Promise<BootstrapResult> {
  return db.transaction(async (tx) => {
    const orgId = newId('org');
    await tx.insert(organizations).values({
      id: orgId,
      name: input.name,
      plan: input.plan ?? 'business',
      entitlementState: (input.plan ?? 'business') === 'trial' ? 'trialing' : 'active',
    });
    await tx.insert(environments).values(DEFAULT_ENVIRONMENTS.map((slug) => ({ id: newId('env'), orgId, slug })));
    const memberId = await addMember(tx, orgId, input.email ?? `owner@${orgId}.invalid`, 'owner');
    const { token } = await issueManagementToken(tx, {
      orgId,
      name: 'bootstrap',
      scopes: ['*'],
      createdByMemberId: memberId,
    });
    return { org_id: orgId, member_id: memberId, management_token: token };
  });
}

export async function addMember(db: Executor, orgId: string, email: string, role: MemberRole): Promise<string> {
  const id = newId('mem');
  await db.insert(members).values({ id, orgId, userId: newId('mem').replace(/^mem_/, 'user_'), email, role });
  return id;
}

export async function findOwner(db: Executor, orgId: string): Promise<string | null> {
  const rows = await db.select({ id: members.id, role: members.role }).from(members).where(eq(members.orgId, orgId));
  return rows.find((m) => m.role === 'owner')?.id ?? null;
}

/** Ids of organizations after `afterId`, in id order: how work over every tenant pages (issue 34). */
export async function organizationIdsAfter(db: Executor, afterId: string | null, limit: number): Promise<string[]> {
  const rows = await db.select({ id: organizations.id }).from(organizations)
    .where(afterId ? gt(organizations.id, afterId) : undefined).orderBy(asc(organizations.id)).limit(limit);
  return rows.map((r) => r.id);
}
