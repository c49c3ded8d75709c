import { scopeAt, windowId, windowStartDay, type ScopeInput } from '../../core/spend/scopes';
import { windowKeys } from '../../core/spend/holds';

/**
 * A window's id is its start day; once a scope's period changed, also its period and when it
 * changed (issue 54): two periods that begin on the same day, or one period before and after a
 * change, never share the Redis counters a window is kept in.
 */
describe('spend window ids', () => {
  const input = (period: ScopeInput['period'], periodSince?: Date | null): ScopeInput => ({
    kind: 'key', id: 'lin_1', code: 'key_budget', limit: 10, blocking: true, period, ledger: { column: 'lineage_id', value: 'lin_1' }, periodSince,
  });
  const monday = new Date('2026-11-23T10:00:00Z');
  const keysOf = (i: ScopeInput, now = monday) => windowKeys(scopeAt('org_1', i, now, 23));

  it('keeps the id a scope always had while its period never changed (a deploy renames no counter)', () => {
    expect(scopeAt('org_1', input('weekly'), monday, 23).window).toBe('2026-11-23');
    expect(scopeAt('org_1', input('monthly'), new Date('2026-11-30T00:00:00Z'), 1).window).toBe('2026-11-01');
    expect(scopeAt('org_1', input('never'), monday, 23).window).toBe('lifetime');
  });

  it('gives the daily, weekly and monthly windows that begin on the same day their own counters once the period changed', () => {
    const since = new Date('2026-11-23T09:00:00Z');
    const [daily, weekly, monthly] = (['daily', 'weekly', 'monthly'] as const).map((p) => keysOf(input(p, since))[0]);
    expect(new Set([daily, weekly, monthly, keysOf(input('daily'))[0]]).size).toBe(4);
    expect(scopeAt('org_1', input('weekly', since), monday, 23).window).toBe(`weekly:2026-11-23~${since.getTime().toString(36)}`);
  });

  it('gives the same period a new window after each change of period', () => {
    const since = new Date('2026-11-23T09:00:00Z');
    const later = new Date('2026-11-23T09:30:00Z');
    expect(keysOf(input('daily', since))[0]).not.toBe(keysOf(input('daily'))[0]);
    expect(keysOf(input('daily', since))[0]).not.toBe(keysOf(input('daily', later))[0]);
    expect(keysOf(input('never', since))[0]).not.toBe(keysOf(input('never'))[0]);
    expect(windowId('daily', monday, since)).toBe(`daily:2026-11-23~${since.getTime().toString(36)}`);
  });

  it('reads the start day back for people, or null for a lifetime window', () => {
    expect(windowStartDay(windowId('monthly', new Date('2026-11-23T00:00:00Z'), new Date()))).toBe('2026-11-23');
    expect(windowStartDay(windowId('never', new Date(0), new Date()))).toBeNull();
    expect(windowStartDay('2026-11-01')).toBe('2026-11-01');
  });
});
