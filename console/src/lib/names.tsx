import type { ReactNode } from 'react';
import { get } from './api';
import { useRead } from './use-read';

/**
 * The management objects pages show by id, by their names instead (ids on hover): keys by label,
 * connections, projects and cost centers by name. One list read per kind a page asks for, the
 * first 100 of each (the console's lists read 100 at most); an id not among them is shown as is.
 */
const LISTS = {
  key: { path: '/gateway_keys?limit=100', name: (o: Named) => o.label },
  connection: { path: '/provider_connections?limit=100', name: (o: Named) => o.name },
  project: { path: '/projects?limit=100', name: (o: Named) => o.name },
  cost_center: { path: '/cost_centers?limit=100', name: (o: Named) => o.name },
} as const;
type Named = { id: string; name?: string; label?: string };
export type NameKind = keyof typeof LISTS;

export type Names = {
  /** The name as text (`fallback` for no id, the id itself when unknown). */
  text(id: string | null | undefined, fallback?: string): string;
  /** The name with its id on hover. */
  show(id: string | null | undefined, fallback?: string): ReactNode;
};

/** Names of one kind; `null` reads nothing (a page that shows none of them right now). */
export function useNames(kind: NameKind | null): Names {
  const read = useRead(kind, () => get<{ data: Named[] }>(LISTS[kind!].path));
  const names = new Map((read.data?.data ?? []).map((o) => [o.id, kind ? LISTS[kind].name(o) : undefined]));
  const text = (id: string | null | undefined, fallback = '(none)') => (id ? names.get(id) || id : fallback);
  return {
    text,
    show: (id, fallback) => (id ? <span title={id}>{text(id)}</span> : text(id, fallback)),
  };
}
