import { useState, type FormEvent } from 'react';
import type { ColumnDef } from '@tanstack/react-table';
import { Link } from 'wouter';
import { DataTable } from '../components/DataTable';
import { FilterFields } from '../components/FilterFields';
import { ReadState } from '../components/ReadState';
import { Pager } from '../components/Pager';
import { useList } from '../lib/use-list';
import { useNames } from '../lib/names';
import { protocolOf, usd, when } from '../lib/format';
import { useUrlState } from '../lib/url-state';
import type { RequestLog } from '../lib/types';

/** Every filter the request log takes (GET /requests), kept in the URL. */
const FILTERS = [
  ['model', 'Model'], ['status', 'Status (429 or 4xx)'], ['route', 'Route'], ['provider', 'Provider'], ['key_id', 'Key id'],
  ['user_id', 'End user'], ['session_id', 'Session'], ['cost_center', 'Cost center (id or unallocated)'], ['trace_id', 'Trace id'], ['from', 'From (ISO 8601)'], ['to', 'To (ISO 8601)'],
] as const;

/** `tags.team=search` filters, written as `team=search, env=prod`. */
function tagsText(params: Record<string, string>): string {
  return Object.entries(params).filter(([k]) => k.startsWith('tags.')).map(([k, v]) => `${k.slice(5)}=${v}`).join(', ');
}

export function Requests() {
  const [params, setParams] = useUrlState();
  const [draft, setDraft] = useState<Record<string, string>>({ ...params, tags: tagsText(params) });
  const search = new URLSearchParams(Object.entries(params).filter(([k]) => k !== 'requests_after'));
  search.set('limit', '50');
  const list = useList<RequestLog>('requests', `/requests?${search.toString()}`);
  const page = list.read;
  const keys = useNames('key');

  const apply = (event: FormEvent) => {
    event.preventDefault();
    const changes: Record<string, string | null> = { requests_after: null };
    for (const [name] of FILTERS) changes[name] = draft[name] ?? null;
    for (const k of Object.keys(params)) if (k.startsWith('tags.')) changes[k] = null;
    for (const pair of (draft.tags ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
      const [tag, ...value] = pair.split('=');
      if (tag && value.length) changes[`tags.${tag.trim()}`] = value.join('=').trim();
    }
    setParams(changes);
  };

  const columns: ColumnDef<RequestLog, unknown>[] = [
    { header: 'Time', cell: ({ row }) => <Link href={`/requests/${row.original.id}`}>{when(row.original.created_at)}</Link> },
    { header: 'Protocol', cell: ({ row }) => <span title={row.original.endpoint}>{protocolOf(row.original.endpoint)}</span> },
    { header: 'Key', cell: ({ row }) => keys.show(row.original.key_id) },
    { header: 'Model', cell: ({ row }) => row.original.model ?? '—' },
    { header: 'Provider', cell: ({ row }) => row.original.provider ?? '—' },
    { header: 'Status', accessorKey: 'status' },
    { header: 'Attempts', cell: ({ row }) => row.original.attempts.length },
    { header: 'Latency', cell: ({ row }) => `${row.original.latency_ms} ms` },
    { header: 'Cost', cell: ({ row }) => usd(row.original.estimated_cost) },
    { header: 'Tags', cell: ({ row }) => Object.entries(row.original.metadata.tags).map(([k, v]) => `${k}=${v}`).join(' ') },
  ];

  return (
    <>
      <h1>Request log</h1>
      <form className="filters" onSubmit={apply} aria-label="Request log filters">
        <FilterFields prefix="f" fields={FILTERS} draft={draft} onChange={setDraft} />
        <span>
          <label htmlFor="f-tags">Tags (team=search, env=prod)</label>
          <input id="f-tags" value={draft.tags ?? ''} onChange={(e) => setDraft({ ...draft, tags: e.target.value })} />
        </span>
        <button type="submit">Apply filters</button>
        <button type="button" onClick={() => page.refresh()}>Refresh</button>
      </form>
      <ReadState read={page} what="the request log">
        {(data) => <><DataTable caption="Requests, newest first" columns={columns} rows={data.data} /><Pager page={data} what="requests" {...list} /></>}
      </ReadState>
    </>
  );
}
