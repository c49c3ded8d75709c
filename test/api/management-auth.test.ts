import { eq } from 'drizzle-orm';
import type { DatabaseHandle } from '../../core/db/client';
import { managementTokens } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { randomClientAddress, startTestApi, testDatabase, type TestApi } from '../helpers/harness';
import { bearer, createTenant } from '../helpers/tenants';

type ErrorBody = { error: { message: string; type: string; code: string | null } };

describe('management token authentication (/manage/v1)', () => {
  let api: TestApi;
  let database: DatabaseHandle;

  beforeAll(async () => {
    api = await startTestApi();
    database = testDatabase();
  });
  afterAll(async () => {
    await api.close();
    await database.close();
  });

  async function readOrganization(headers: Record<string, string>) {
    const res = await fetch(`${api.url}/manage/v1/organization`, { headers: { ...headers, 'x-forwarded-for': randomClientAddress() } });
    return { status: res.status, body: (await res.json()) as ErrorBody & Record<string, unknown> };
  }

  it('reads the organization with the bootstrap token', async () => {
    const tenant = await createTenant(database.db);
    const res = await readOrganization(bearer(tenant.token));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: tenant.orgId,
      object: 'organization',
      plan: 'business',
      environments: ['development', 'production', 'staging'],
    });
  });

  it.each([
    ['missing', {}],
    ['unknown', bearer('gwm_nottherightoneatallnottherightone')],
    ['malformed', { authorization: 'Token abc' }],
  ])('answers a %s token with 401 authentication_error', async (_what, headers) => {
    const res = await readOrganization(headers);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { message: expect.any(String), type: 'authentication_error', code: null } });
  });

  it('answers a gateway key with 401', async () => {
    const tenant = await createTenant(database.db);
    const res = await readOrganization(bearer(tenant.key.secret));
    expect(res.status).toBe(401);
    expect(res.body.error.message).toMatch(/gateway key/);
  });

  it('answers revoked and expired tokens with 401', async () => {
    const tenant = await createTenant(database.db);
    const expired = await issueManagementToken(database.db, {
      orgId: tenant.orgId, name: 'old', scopes: ['*'], createdByMemberId: tenant.memberId, expiresAt: new Date(Date.now() - 1),
    });
    expect((await readOrganization(bearer(expired.token))).status).toBe(401);
    await database.db.update(managementTokens).set({ revokedAt: new Date() }).where(eq(managementTokens.orgId, tenant.orgId));
    expect((await readOrganization(bearer(tenant.token))).status).toBe(401);
  });

  it('lets *:read cover every read scope, and refuses a token without the scope with 403 insufficient_scope', async () => {
    const tenant = await createTenant(database.db);
    const reader = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'r', scopes: ['*:read'], createdByMemberId: tenant.memberId });
    const narrow = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'n', scopes: ['analytics:read'], createdByMemberId: tenant.memberId });
    const exact = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'e', scopes: ['organization:read'], createdByMemberId: tenant.memberId });
    expect((await readOrganization(bearer(reader.token))).status).toBe(200);
    expect((await readOrganization(bearer(exact.token))).status).toBe(200);
    const refused = await readOrganization(bearer(narrow.token));
    expect(refused.status).toBe(403);
    expect(refused.body.error).toEqual({ message: expect.any(String), type: 'permission_denied', code: 'insufficient_scope' });
  });
});
