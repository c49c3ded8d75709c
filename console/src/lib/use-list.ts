import { get, type ListPage } from './api';
import { useUrlState } from './url-state';
import { useRead, type Read } from './use-read';

/**
 * One list of a page, paged with the API's cursors: its cursor lives in the URL as
 * `<name>_after`, so a shared link opens the same page of it, and each list is read once a refresh.
 */
export function useList<T>(name: string, path: string, cursorParam = 'after'): { read: Read<ListPage<T>>; next: () => void; first: () => void; paged: boolean } {
  const [params, setParams] = useUrlState();
  const after = params[`${name}_after`];
  const url = after ? `${path}${path.includes('?') ? '&' : '?'}${cursorParam}=${encodeURIComponent(after)}` : path;
  const read = useRead(url, () => get<ListPage<T>>(url));
  return {
    read,
    paged: Boolean(after),
    next: () => read.data?.next_cursor && setParams({ [`${name}_after`]: read.data.next_cursor }),
    first: () => setParams({ [`${name}_after`]: null }),
  };
}
