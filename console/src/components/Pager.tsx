import type { ListPage } from '../lib/api';

/** "Next page" while the API says more follow, and a way back to the first page. */
export function Pager({ page, what, next, first, paged }: { page: ListPage<unknown>; what: string; next: () => void; first: () => void; paged: boolean }) {
  if (!page.has_more && !paged) return null;
  return (
    <p className="pager">
      {paged && <button type="button" onClick={first}>First page of {what}</button>}
      {page.has_more && <button type="button" onClick={next}>Next page of {what}</button>}
    </p>
  );
}
