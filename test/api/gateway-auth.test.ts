import { eq } from 'drizzle-orm';
import { publishConfigChange } from '../../core/cache/config-changes';
import type { DatabaseHandle } from '../../core/db/client';
import { gatewayKeys, organizations, projects } from '../../core/db/schema';
import { connectRedis, type RedisHandle } from '../../core/redis';
import { randomClientAddress, startTestApi, testDatabase, type TestApi } from '../helpers/harness';
import { bearer, createTenant } from '../helpers/tenants';

type ErrorBody = { error: { message: string; type: string; code: string | null } };

describe('gateway key authentication (/v1)', () => {
  let api: TestApi;
  let database: DatabaseHandle;
  let redis: RedisHandle;

  // Its own Redis prefix: other test files' management writes publish config changes on the
  // shared prefix, and one arriving mid-test would empty the cache the warm-key test relies on.
  const redisPrefix = `${process.env.REDIS_KEY_PREFIX}gateway-auth:`;

  beforeAll(async () => {
    api = await startTestApi({ env: { REDIS_KEY_PREFIX: redisPrefix } });
    database = testDatabase();
    redis = connectRedis(process.env.REDIS_URL!, redisPrefix);
  });
  afterAll(async () => {
    await api.close();
    await database.close();
    await redis.close();
  });

  async function models(headers: Record<string, string>, from = randomClientAddress()) {
    // Each case gets its own client address so failure counting stays per test.
    const res = await fetch(`${api.url}/v1/models`, { headers: { ...headers, 'x-forwarded-for': from } });
    return { status: res.status, body: (await res.json()) as ErrorBody & Record<string, unknown>, headers: res.headers };
  }

  /** Management changes reach the key cache through Redis pub/sub; tests change rows directly. */
  async function changed() {
    await publishConfigChange(redis, 'test');
    await new Promise((r) => setTimeout(r, 100));
  }

  it('accepts a valid key', async () => {
    const tenant = await createTenant(database.db);
    const res = await models(bearer(tenant.key.secret));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ object: 'list', data: [] });
  });

  it.each([
    ['missing', {}],
    ['malformed', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['unknown', bearer('gwk_notarealkeynotarealkeynotarealkey')],
    ['not a gateway key at all', bearer('sk-something-else')],
  ])('answers a %s key with 401 authentication_error', async (_what, headers) => {
    const res = await models(headers);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { message: expect.any(String), type: 'authentication_error', code: null } });
  });

  it('answers a management token with 401', async () => {
    const tenant = await createTenant(database.db);
    const res = await models(bearer(tenant.token));
    expect(res.status).toBe(401);
    expect(res.body.error.type).toBe('authentication_error');
    expect(res.body.error.message).toMatch(/management token/);
  });

  it('answers a revoked key with 401 and an expired one with 401', async () => {
    const revoked = await createTenant(database.db);
    const expired = await createTenant(database.db, { expiresAt: new Date(Date.now() - 1000) });
    await database.db.update(gatewayKeys).set({ revokedAt: new Date() }).where(eq(gatewayKeys.id, revoked.key.id));
    await changed();
    expect((await models(bearer(revoked.key.secret))).status).toBe(401);
    expect((await models(bearer(expired.key.secret))).status).toBe(401);
  });

  it('answers a disabled key with 403 key_disabled, and serves it again once re-enabled', async () => {
    const tenant = await createTenant(database.db);
    expect((await models(bearer(tenant.key.secret))).status).toBe(200);
    await database.db.update(gatewayKeys).set({ disabled: true }).where(eq(gatewayKeys.id, tenant.key.id));
    await changed();
    const res = await models(bearer(tenant.key.secret));
    expect(res.status).toBe(403);
    expect(res.body.error).toEqual({ message: expect.any(String), type: 'permission_denied', code: 'key_disabled' });
    await database.db.update(gatewayKeys).set({ disabled: false }).where(eq(gatewayKeys.id, tenant.key.id));
    await changed();
    expect((await models(bearer(tenant.key.secret))).status).toBe(200);
  });

  it('answers a key of an archived project with 403 project_archived', async () => {
    const tenant = await createTenant(database.db);
    await database.db.update(projects).set({ archivedAt: new Date() }).where(eq(projects.id, tenant.projectId));
    await changed();
    const res = await models(bearer(tenant.key.secret));
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('project_archived');
  });

  it('refuses requests from outside allowed_ips with 403 ip_not_allowed', async () => {
    const tenant = await createTenant(database.db, { allowedIps: ['203.0.113.0/24'] });
    const api2 = await startTestApi();
    try {
      const inside = await fetch(`${api2.url}/v1/models`, { headers: { ...bearer(tenant.key.secret), 'x-forwarded-for': '203.0.113.7' } });
      const outside = await fetch(`${api2.url}/v1/models`, { headers: { ...bearer(tenant.key.secret), 'x-forwarded-for': '198.51.100.1' } });
      expect(inside.status).toBe(200);
      expect(outside.status).toBe(403);
      expect(((await outside.json()) as ErrorBody).error.code).toBe('ip_not_allowed');
    } finally {
      await api2.close();
    }
  });

  it('refuses traffic for a suspended or lapsed organization', async () => {
    const suspended = await createTenant(database.db);
    const lapsed = await createTenant(database.db);
    await database.db.update(organizations).set({ entitlementState: 'suspended', supportEmail: 'help@example.com' }).where(eq(organizations.id, suspended.orgId));
    await database.db.update(organizations).set({ entitlementState: 'lapsed' }).where(eq(organizations.id, lapsed.orgId));
    await changed();
    const s = await models(bearer(suspended.key.secret));
    expect(s.status).toBe(403);
    expect(s.body.error).toMatchObject({ type: 'permission_denied', code: 'organization_suspended', support_email: 'help@example.com' });
    const l = await models(bearer(lapsed.key.secret));
    expect(l.status).toBe(402);
    expect(l.body.error).toMatchObject({ type: 'budget_exceeded', code: 'subscription_required' });
  });

  it('answers bulk invalid keys from one address with 429 invalid_api_key_rate_limited, counted across instances', async () => {
    const second = await startTestApi();
    const first = await startTestApi();
    const limit = first.config.GW_AUTH_FAILURES_PER_MINUTE;
    const address = `198.18.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
    try {
      const statuses: number[] = [];
      for (let i = 0; i < limit + 2; i++) {
        // Alternate between two API instances: only a shared (Redis) count reaches the limit.
        const target = i % 2 === 0 ? first : second;
        const res = await fetch(`${target.url}/v1/models`, { headers: { ...bearer(`gwk_bad${i}`), 'x-forwarded-for': address } });
        statuses.push(res.status);
        if (res.status === 429) {
          expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
          expect(((await res.json()) as ErrorBody).error).toEqual({
            message: expect.any(String),
            type: 'rate_limit_exceeded',
            code: 'invalid_api_key_rate_limited',
          });
        } else {
          await res.arrayBuffer();
        }
      }
      expect(statuses.slice(0, limit).every((s) => s === 401)).toBe(true);
      expect(statuses.slice(limit)).toEqual([429, 429]);
      // Another address is unaffected.
      const other = await fetch(`${first.url}/v1/models`, { headers: { ...bearer('gwk_bad'), 'x-forwarded-for': '192.0.2.99' } });
      expect(other.status).toBe(401);
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('drops only the changed organization\'s cached keys', async () => {
    const a = await createTenant(database.db);
    const b = await createTenant(database.db);
    for (const t of [a, b]) expect((await models(bearer(t.key.secret))).status).toBe(200);
    for (const t of [a, b]) await database.db.delete(gatewayKeys).where(eq(gatewayKeys.id, t.key.id));
    await publishConfigChange(redis, { orgId: a.orgId, what: 'test' });
    await new Promise((r) => setTimeout(r, 100));
    expect((await models(bearer(a.key.secret))).status).toBe(401);
    // Organization B's key is still served from memory: its organization did not change.
    expect((await models(bearer(b.key.secret))).status).toBe(200);
  });

  it('reads no Postgres for a warm key (served from the in-process cache)', async () => {
    const tenant = await createTenant(database.db);
    expect((await models(bearer(tenant.key.secret))).status).toBe(200);
    // Removing the row without announcing a change: a warm cache still answers from memory.
    await database.db.delete(gatewayKeys).where(eq(gatewayKeys.id, tenant.key.id));
    expect((await models(bearer(tenant.key.secret))).status).toBe(200);
    await changed();
    expect((await models(bearer(tenant.key.secret))).status).toBe(401);
  });
});
