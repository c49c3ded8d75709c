import fc from 'fast-check';
import { allocate, ruleHistoryOf } from '../../core/attribution/rule-history';
import { firstMatch, orderRules, ruleMatches, splitCost, valueMatches, type AllocationRule, type AttributedRequest } from '../../core/attribution/rules';

const at = (n: number) => new Date(Date.UTC(2026, 0, 1) + n * 1000);
const rule = (over: Partial<AllocationRule>): AllocationRule =>
  Object.assign({ ruleId: 'ccr_x', versionId: 'ccrv_x', priority: 10, createdAt: at(0), match: {}, costCenterId: 'A', allocation: null }, over);
const request = (over: Partial<AttributedRequest>): AttributedRequest =>
  Object.assign({ projectId: 'proj_1', keyId: 'key_1', model: 'gpt-4o-mini', provider: 'openai', route: null, userId: null, tags: {} }, over);

describe('cost attribution rules', () => {
  it('matches values exactly or by a trailing-* prefix, and every condition must hold', () => {
    expect(valueMatches('gpt-4o*', 'gpt-4o-mini')).toBe(true);
    expect(valueMatches('gpt-4o', 'gpt-4o-mini')).toBe(false);
    expect(valueMatches('*', 'anything')).toBe(true);
    expect(valueMatches('x', null)).toBe(false);
    expect(ruleMatches({ model: 'gpt-*', tags: { team: 'search' } }, request({ tags: { team: 'search', env: 'prod' } }))).toBe(true);
    expect(ruleMatches({ model: 'gpt-*', tags: { team: 'search' } }, request({ tags: { team: 'ads' } }))).toBe(false);
    expect(ruleMatches({ user_id: 'cust_*' }, request({}))).toBe(false);
    expect(ruleMatches({}, request({}))).toBe(true);
  });

  it('allocates a mix of requests by the first matching rule by priority, as worked out by hand', () => {
    const rules = orderRules([
      rule({ ruleId: 'catch-all', priority: 100, match: {}, costCenterId: 'PLATFORM' }),
      rule({ ruleId: 'search', priority: 10, match: { tags: { team: 'search*' } }, costCenterId: 'SEARCH' }),
      rule({ ruleId: 'claude', priority: 20, match: { provider: 'anthropic' }, costCenterId: null, allocation: [{ cost_center_id: 'SEARCH', percent: 50 }, { cost_center_id: 'ADS', percent: 50 }] }),
      rule({ ruleId: 'vip', priority: 10, createdAt: at(-5), match: { user_id: 'vip_*' }, costCenterId: 'SALES' }),
    ]);
    const cases: Array<[Partial<AttributedRequest>, string | null]> = [
      [{ tags: { team: 'search-infra' } }, 'search'],
      [{ tags: { team: 'search' }, userId: 'vip_9' }, 'vip'], // same priority: the older rule first
      [{ provider: 'anthropic', model: 'claude-3' }, 'claude'],
      [{ provider: 'anthropic', tags: { team: 'search' } }, 'search'],
      [{}, 'catch-all'],
    ];
    for (const [over, expected] of cases) expect(firstMatch(rules, request(over))?.ruleId ?? null).toBe(expected);
    expect(firstMatch(orderRules([rule({ match: { model: 'o1' } })]), request({}))).toBeNull();
  });

  it('splits 33.33/33.33/33.34 so the parts always add up to the cost, to the nano-dollar', () => {
    const split = rule({ costCenterId: null, allocation: [{ cost_center_id: 'A', percent: 33.33 }, { cost_center_id: 'B', percent: 33.33 }, { cost_center_id: 'C', percent: 33.34 }] });
    expect(splitCost(1000, split, new Set())).toEqual([{ costCenterId: 'A', nanos: 333 }, { costCenterId: 'B', nanos: 333 }, { costCenterId: 'C', nanos: 334 }]);
    expect(splitCost(1, split, new Set()).reduce((s, p) => s + p.nanos, 0)).toBe(1);
    fc.assert(fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (nanos) => splitCost(nanos, split, new Set()).reduce((s, p) => s + p.nanos, 0) === nanos));
    // Many cheap requests: each split exactly, so any bucket's sum is exact too.
    let total = 0;
    const byCenter = new Map<string | null, number>();
    for (let i = 1; i <= 5000; i++) {
      const nanos = 37 + (i % 11);
      total += nanos;
      for (const p of splitCost(nanos, split, new Set())) byCenter.set(p.costCenterId, (byCenter.get(p.costCenterId) ?? 0) + p.nanos);
    }
    expect([...byCenter.values()].reduce((a, b) => a + b, 0)).toBe(total);
  });

  it('sends an archived center\'s share, and a request no rule matches, to unallocated', () => {
    expect(splitCost(500, null, new Set())).toEqual([{ costCenterId: null, nanos: 500 }]);
    expect(splitCost(500, rule({ costCenterId: 'OLD' }), new Set(['OLD']))).toEqual([{ costCenterId: null, nanos: 500 }]);
    const half = rule({ costCenterId: null, allocation: [{ cost_center_id: 'OLD', percent: 50 }, { cost_center_id: 'NEW', percent: 50 }] });
    expect(splitCost(101, half, new Set(['OLD']))).toEqual([{ costCenterId: null, nanos: 51 }, { costCenterId: 'NEW', nanos: 50 }]);
  });

  describe('rule history: the rules in force when a request was served', () => {
    const t0 = Date.UTC(2026, 0, 1);
    const version = (over: Record<string, unknown>) => Object.assign({
      id: 'v1', rule_id: 'r1', version: 1, effective_at: new Date(t0), ended: false, priority: 10, match: {}, cost_center_id: 'A', allocation: null, rule_created_at: new Date(t0),
    }, over);
    const history = ruleHistoryOf([
      version({}),
      version({ id: 'v2', version: 2, effective_at: new Date(t0 + 60_000), cost_center_id: 'B' }),
      version({ id: 'v3', version: 3, effective_at: new Date(t0 + 120_000), ended: true, cost_center_id: 'B' }),
      version({ id: 'w1', rule_id: 'r2', effective_at: new Date(t0 + 30_000), priority: 50, cost_center_id: null, allocation: [{ cost_center_id: 'B', percent: 25 }, { cost_center_id: 'C', percent: 75 }] }),
    ], [{ id: 'C', archivedAt: t0 + 90_000 }], t0);
    const who = (at: number, cost: number | null = 0.000001) => allocate(history, request({}), cost, at);

    it('allocates by the version in force at the request\'s time, including one superseded or ended since', () => {
      expect(history.epochs.map((e) => e.from - t0)).toEqual([0, 30_000, 60_000, 90_000, 120_000]);
      expect(who(t0 + 10)).toEqual({ ruleId: 'r1', versionId: 'v1', shares: [{ cost_center_id: 'A', percent: 100, cost: 0.000001 }] });
      expect(who(t0 + 60_000).versionId).toBe('v2');
      // A time before the history's start reads its first epoch.
      expect(who(t0 - 5_000).versionId).toBe('v1');
      // r1 ended at +120 s: the split rule allocates from then on, and C was archived at +90 s.
      expect(who(t0 + 130_000)).toEqual({ ruleId: 'r2', versionId: 'w1', shares: [{ cost_center_id: 'B', percent: 25, cost: 0.00000025 }, { cost_center_id: null, percent: 75, cost: 0.00000075 }] });
    });

    it('records percents with a null cost when the request has none, and nothing for an organization without rules', () => {
      expect(who(t0 + 130_000, null).shares).toEqual([{ cost_center_id: 'B', percent: 25, cost: null }, { cost_center_id: null, percent: 75, cost: null }]);
      expect(allocate(ruleHistoryOf([], [], t0), request({}), 1, t0)).toEqual({ ruleId: null, versionId: null, shares: null });
    });
  });
});
