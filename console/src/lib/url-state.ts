import { useLocation, useSearch } from 'wouter';

/**
 * Filters, grouping and time range live in the URL's query, so a view can be shared and the
 * back button undoes a filter. Setting a value to '' removes it.
 */
export function useUrlState(): [Record<string, string>, (changes: Record<string, string | null>) => void] {
  const search = useSearch();
  const [location, navigate] = useLocation();
  const params = Object.fromEntries(new URLSearchParams(search));
  const update = (changes: Record<string, string | null>) => {
    const next = new URLSearchParams(search);
    for (const [k, v] of Object.entries(changes)) {
      if (v === null || v === '') next.delete(k);
      else next.set(k, v);
    }
    const text = next.toString();
    navigate(text ? `${location}?${text}` : location);
  };
  return [params, update];
}
