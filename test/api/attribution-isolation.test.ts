import { PgDialect } from 'drizzle-orm/pg-core';
import type { SQL } from 'drizzle-orm';
import { createRequestAttribution } from '../../core/attribution/request-attribution';
import type { Database } from '../../core/db/client';
import { costCenterRules, costCenterRuleVersions, costCenters } from '../../core/db/schema';
import { newId } from '../../core/ids';
import type { RequestLogEntry } from '../../core/request-log/writer';
import { testDatabase } from '../helpers/harness';
import { createTenant } from '../helpers/tenants';

/**
 * Issue 33: one organization's cost-center rules failing to load (here, every query naming it
 * fails) leaves that organization's rows unattributed and says so, and every other
 * organization's rows in the same batch are attributed as usual.
 */
describe('request attribution across organizations', () => {
  const database = testDatabase();
  afterAll(() => database.close());

  it('attributes the other organizations\' rows when one organization\'s rules cannot be loaded', async () => {
    const db = database.db;
    const [healthy, broken] = [await createTenant(db), await createTenant(db)];
    const rule = async (orgId: string) => {
      const center = newId('ccen');
      await db.insert(costCenters).values({ id: center, orgId, name: `c ${center}`, code: center });
      const [ruleId, versionId] = [newId('ccr'), newId('ccrv')];
      await db.insert(costCenterRules).values({ id: ruleId, orgId, versionId, priority: 1, match: {}, costCenterId: center, allocation: null });
      await db.insert(costCenterRuleVersions).values({ id: versionId, orgId, ruleId, version: 1, priority: 1, match: {}, costCenterId: center, allocation: null, effectiveAt: new Date(Date.now() - 60_000) });
      return { center, ruleId };
    };
    const mine = await rule(healthy.orgId);
    await rule(broken.orgId);
    const dialect = new PgDialect();
    const failing = new Proxy(db, {
      get(target, name, receiver) {
        if (name !== 'execute') return Reflect.get(target, name, receiver);
        return (query: SQL) => (dialect.sqlToQuery(query).params.includes(broken.orgId) ? Promise.reject(new Error('connection reset')) : target.execute(query));
      },
    }) as Database;
    const attribution = createRequestAttribution(failing);
    const row = (orgId: string, keyId: string, projectId: string): RequestLogEntry => ({
      id: newId('req'), orgId, keyId, projectId, endpoint: 'chat.completions', requestedModel: 'openai/gpt-4o-mini', status: 200, latencyMs: 5, cost: 0.001, createdAt: new Date(),
    });
    const rows = [row(broken.orgId, broken.key.id, broken.projectId), row(healthy.orgId, healthy.key.id, healthy.projectId)];
    await expect(attribution.attributeRows(rows)).rejects.toThrow(broken.orgId);
    expect(rows[0]!.costRuleId ?? null).toBeNull();
    expect([rows[1]!.costRuleId, rows[1]!.costAllocation?.map((s) => s.cost_center_id)]).toEqual([mine.ruleId, [mine.center]]);
  });

  it('attributes a row at once when its organization\'s rules are loaded, and not before (the row then waits for its batch)', async () => {
    const db = database.db;
    const tenant = await createTenant(db);
    const center = newId('ccen');
    await db.insert(costCenters).values({ id: center, orgId: tenant.orgId, name: `c ${center}`, code: center });
    const [ruleId, versionId] = [newId('ccr'), newId('ccrv')];
    await db.insert(costCenterRules).values({ id: ruleId, orgId: tenant.orgId, versionId, priority: 1, match: {}, costCenterId: center, allocation: null });
    await db.insert(costCenterRuleVersions).values({ id: versionId, orgId: tenant.orgId, ruleId, version: 1, priority: 1, match: {}, costCenterId: center, allocation: null, effectiveAt: new Date(Date.now() - 60_000) });
    const attribution = createRequestAttribution(db);
    const row = (): RequestLogEntry => ({
      id: newId('req'), orgId: tenant.orgId, keyId: tenant.key.id, projectId: tenant.projectId, endpoint: 'chat.completions', requestedModel: 'openai/gpt-4o-mini', status: 200, latencyMs: 5, cost: 0.002, createdAt: new Date(),
    });
    const first = row();
    expect(attribution.attributeRowNow(first)).toBe(false);
    expect(first.costRuleId ?? null).toBeNull();
    // The batch's attribution waits for the load the first call started.
    await attribution.attributeRows([first]);
    expect(first.costRuleId).toBe(ruleId);
    const second = row();
    expect(attribution.attributeRowNow(second)).toBe(true);
    expect([second.costRuleId, second.costAllocation?.map((s) => s.cost_center_id)]).toEqual([ruleId, [center]]);
    // A management write clears the organization: the next row waits again.
    attribution.clearOrg(tenant.orgId);
    expect(attribution.attributeRowNow(row())).toBe(false);
  });
});
