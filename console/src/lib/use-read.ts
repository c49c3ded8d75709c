import { useCallback, useEffect, useState } from 'react';
import { ApiError } from './api';

export type Read<T> = { data: T | null; error: ApiError | Error | null; loading: boolean; refresh: () => void };

/**
 * One read per refresh: the request runs when `key` changes (a page's filters) or on refresh,
 * and a stale answer never overwrites a newer one.
 */
export function useRead<T>(key: string | null, load: () => Promise<T>): Read<T> {
  const [state, setState] = useState<{ data: T | null; error: ApiError | Error | null; loading: boolean }>({ data: null, error: null, loading: key !== null });
  const [tick, setTick] = useState(0);
  const run = useCallback(load, [key, tick]);
  useEffect(() => {
    if (key === null) return;
    let current = true;
    setState((s) => ({ ...s, loading: true }));
    run().then(
      (data) => current && setState({ data, error: null, loading: false }),
      (error: Error) => current && setState({ data: null, error, loading: false }),
    );
    return () => {
      current = false;
    };
  }, [run, key]);
  return { ...state, refresh: () => setTick((t) => t + 1) };
}
