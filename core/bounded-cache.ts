import { LRUCache } from 'lru-cache';

type Options<K extends NonNullable<unknown>, V extends NonNullable<unknown>> = Omit<LRUCache.Options<K, V, unknown>, 'max' | 'maxSize' | 'sizeCalculation'>;

const ONE = () => 1;

/**
 * An LRU cache of at most `entries` entries whose memory grows as it fills. lru-cache's `max`
 * allocates its arrays for that many entries up front (4.4 MB for 100 000): the API paid about
 * 8 MB at start for caches mostly empty. The same bound as a size with every entry counting 1
 * allocates as entries arrive and evicts the same way.
 */
export function boundedCache<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(entries: number, options: Options<K, V> = {}): LRUCache<K, V> {
  return new LRUCache<K, V>({ maxSize: entries, sizeCalculation: ONE, ...options });
}
