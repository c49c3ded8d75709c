import Koa from 'koa';
import { z } from 'zod';
import type { ManagementPrincipal } from '../../core/auth/management-token-auth';
import { systemClock } from '../../core/clock';
import type { DatabaseHandle } from '../../core/db/client';
import type { Plan } from '../../core/db/schema';
import { createLogger } from '../../core/logger';
import type { RedisHandle } from '../../core/redis';
import { listen } from '../../api/listen';
import type { GatewayState } from '../../api/context';
import { bodyLimit, jsonBody } from '../../api/middleware/body';
import { errorHandler } from '../../api/middleware/error-handler';
import { requestContext } from '../../api/middleware/request-context';
import { modelPricesResource } from '../../api/manage/resources/model-prices';
import type { PlanGatedWrite, ResourceType } from '../../api/manage/resources/resource-type';
import { resourceRouter } from '../../api/manage/resources/router';
import type { ManagementServices } from '../../api/manage/services';
import { testDatabase, testRedis } from '../helpers/harness';
import { createTenant, type Tenant } from '../helpers/tenants';

/**
 * Plan gates (spec 4.4, 5.6 `plan_feature`) are declared by a resource type (`planFor`) and
 * enforced by the one resource framework. No resource the spec gates exists yet (the
 * tool-gateway types), so a stand-in type declares the tool-gateway rules over model prices:
 * writes need Team, enabling needs Business, disabling and deleting are never gated.
 */
describe('plan gates in the resource framework', () => {
  let database: DatabaseHandle;
  let redis: RedisHandle;
  let tenant: Tenant;
  let server: Awaited<ReturnType<typeof listen>>;
  let url: string;
  let seq = 0;

  const planFor = (write: PlanGatedWrite): Plan | null => {
    switch (write.kind) {
      case 'create': return 'business';
      case 'remove': return null;
      case 'action': return write.action === 'enable' ? 'business' : write.action === 'disable' ? null : 'team';
      case 'patch': return 'team';
    }
  };
  const noop = { summary: 'no-op', schema: z.object({}), ifMatch: 'optional' as const, run: async () => ({}) };
  const gated = { ...modelPricesResource, type: 'gated_things', planFor, actions: { enable: noop, disable: noop, sync: noop } } as unknown as ResourceType;

  beforeAll(async () => {
    database = testDatabase();
    redis = testRedis();
    tenant = await createTenant(database.db);
    const app = new Koa<GatewayState>();
    app.silent = true;
    app.use(requestContext(createLogger('silent')));
    app.use(errorHandler());
    app.use(bodyLimit());
    app.use(async (ctx, next) => {
      const principal: ManagementPrincipal = {
        tokenId: 'mtok_test', orgId: tenant.orgId, plan: ctx.get('x-test-plan') as Plan, scopes: ['*'], projectIds: null, memberId: tenant.memberId, role: 'owner',
      };
      ctx.state.principal = principal;
      await next();
    });
    app.use(jsonBody());
    app.use(resourceRouter([gated as never], { db: database.db, redis, clock: systemClock, manage: {} as ManagementServices }).routes());
    server = await listen(app, 0, '127.0.0.1');
    url = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.close();
    await redis.close();
    await database.close();
  });

  async function call(plan: Plan, method: string, path: string, body?: unknown, ifMatch?: string) {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { 'x-test-plan': plan, 'content-type': 'application/json', ...(ifMatch ? { 'if-match': ifMatch } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, etag: res.headers.get('etag'), body: (text ? JSON.parse(text) : {}) as { id?: string; version?: number; error?: { type: string; code: string | null } } };
  }
  const planRefused = (res: { status: number; body: { error?: { type: string; code: string | null } } }) =>
    expect([res.status, res.body.error?.type, res.body.error?.code]).toEqual([403, 'permission_denied', 'plan_feature']);
  const price = () => ({ model: `gated-${Date.now()}-${seq++}`, input_per_million: 1, output_per_million: 2 });

  it('refuses an enabling create below Business, and allows it on Business', async () => {
    planRefused(await call('trial', 'POST', '/gated_things', price()));
    planRefused(await call('team', 'POST', '/gated_things', price()));
    expect((await call('business', 'POST', '/gated_things', price())).status).toBe(201);
  });

  it('refuses writes below Team, enabling actions below Business; disabling and deleting are never gated', async () => {
    const created = await call('business', 'POST', '/gated_things', price());
    const id = created.body.id!;
    planRefused(await call('trial', 'PATCH', `/gated_things/${id}`, { note: 'x' }, created.etag!));
    const patched = await call('team', 'PATCH', `/gated_things/${id}`, { note: 'x' }, created.etag!);
    expect(patched.status).toBe(200);

    planRefused(await call('trial', 'POST', `/gated_things/${id}/sync`, {}));
    expect((await call('team', 'POST', `/gated_things/${id}/sync`, {})).status).toBe(200);
    planRefused(await call('team', 'POST', `/gated_things/${id}/enable`, {}));
    expect((await call('business', 'POST', `/gated_things/${id}/enable`, {})).status).toBe(200);
    expect((await call('trial', 'POST', `/gated_things/${id}/disable`, {})).status).toBe(200);

    // Reads are never plan-gated; nor is a delete.
    expect((await call('trial', 'GET', `/gated_things/${id}`)).status).toBe(200);
    expect((await call('trial', 'DELETE', `/gated_things/${id}`, undefined, patched.etag!)).status).toBe(200);
  });
});
