import { boundedCache } from '../../core/bounded-cache';

describe('boundedCache', () => {
  it('holds at most its number of entries, evicting the least recently used', () => {
    const cache = boundedCache<string, number>(3);
    for (const [i, k] of ['a', 'b', 'c'].entries()) cache.set(k, i);
    expect(cache.get('a')).toBe(0); // a is now the most recent
    cache.set('d', 3);
    expect(cache.size).toBe(3);
    expect(cache.has('b')).toBe(false);
    expect([...cache.keys()].sort()).toEqual(['a', 'c', 'd']);
    for (let i = 0; i < 100; i++) cache.set(`k${i}`, i);
    expect(cache.size).toBe(3);
  });

  it('allocates as it fills rather than for its bound up front', () => {
    // lru-cache's own `max` would size its arrays for the bound at construction.
    expect(boundedCache<string, number>(100_000).max).toBe(0);
  });

  it('keeps the options it is given (ttl)', () => {
    let now = 1_000;
    const cache = boundedCache<string, number>(10, { ttl: 50, ttlResolution: 0, perf: { now: () => now } });
    cache.set('a', 1);
    now += 49;
    expect(cache.get('a')).toBe(1);
    now += 2;
    expect(cache.get('a')).toBeUndefined();
  });
});
