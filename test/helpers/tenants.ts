import type { Database } from '../../core/db/client';
import { bootstrapOrganization } from '../../core/tenancy/organizations';
import { createProject, issueGatewayKey, type IssueKeyInput } from '../../core/tenancy/gateway-keys';

export type Tenant = { orgId: string; memberId: string; token: string; projectId: string; key: { id: string; secret: string } };

/** An organization with its owner's all-scope token, one project and one gateway key. */
export async function createTenant(db: Database, key: Partial<IssueKeyInput> = {}): Promise<Tenant> {
  const org = await bootstrapOrganization(db, { name: 'Test Org', plan: 'business' });
  const projectId = await createProject(db, { orgId: org.org_id, name: 'Test Project' });
  const issued = await issueGatewayKey(db, { orgId: org.org_id, projectId, label: 'test key', ...key });
  return { orgId: org.org_id, memberId: org.member_id, token: org.management_token, projectId, key: issued };
}

export function bearer(secret: string): Record<string, string> {
  return { authorization: `Bearer ${secret}` };
}
