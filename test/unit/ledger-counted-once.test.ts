import { commitmentSpend } from '../../core/attribution/commitment-figures';
import { spendLedger } from '../../core/db/schema';
import { budgetUses } from '../../core/findings/series';
import { newId } from '../../core/ids';
import { ledgerWindowTotal } from '../../core/spend/ledger';
import { toNanos } from '../../core/spend/money';
import { testDatabase } from '../helpers/harness';
import { createTenant } from '../helpers/tenants';

/**
 * Issue 54, item 7: a lapsed spend lease is recorded at its full amount, which covers the
 * requests that settled under its last step; when their rows land too, every reader counts the
 * two once, as their larger. The budget forecast summed both.
 */
describe('ledger rows counted once: a lapsed lease and the requests it covers', () => {
  const database = testDatabase();
  afterAll(() => database.close());

  it('the window total, the budget forecast and a commitment\'s spend read the same', async () => {
    const now = new Date();
    const tenant = await createTenant(database.db, { creditLimit: { amount: 100, period: 'monthly' } });
    const row = (amount: number, requestId: string, leaseRef: string | null) => ({
      id: newId('spend'), orgId: tenant.orgId, lineageId: tenant.key.id, projectId: tenant.projectId, amount, state: 'settled' as const,
      requestId, leaseRef, createdAt: new Date(now.getTime() - 60_000), provider: 'openai', model: 'gpt-4o-mini',
    });
    await database.db.insert(spendLedger).values([
      // The lease lapsed at $5; $3 of requests settled under its last step landed as well: $5 counts.
      row(5, 'lease:p:1', 'lease:p:1#3'), row(2, 'req_a', 'lease:p:1#3'), row(1, 'req_b', 'lease:p:1#3'),
      // Another lapse whose requests' rows came to more than it: theirs, $4, count.
      row(1.5, 'lease:p:2', 'lease:p:2#1'), row(4, 'req_c', 'lease:p:2#1'),
      // A request of no lease.
      row(0.25, 'req_d', null),
    ]);
    const expected = 5 + 4 + 0.25;
    const windowStart = new Date(now.getTime() - 3_600_000);
    expect(await ledgerWindowTotal(database.db, { orgId: tenant.orgId, ledger: { column: 'lineage_id', value: tenant.key.id }, windowStart })).toBe(BigInt(toNanos(expected)));
    const [use] = (await budgetUses(database.db, now, [tenant.orgId])).filter((u) => u.scope.kind === 'key');
    expect(use).toMatchObject({ spent: expected, last24h: expected });
    const commitment = { orgId: tenant.orgId, providerKind: 'openai', models: ['gpt-4o-mini'], periodStart: windowStart, periodEnd: new Date(now.getTime() + 86_400_000) };
    expect(await commitmentSpend(database.db, commitment, now)).toEqual({ period: expected, trailingWeek: expected });
  });
});
