import { useState, type FormEvent } from 'react';
import type { ColumnDef } from '@tanstack/react-table';
import { DataTable } from '../components/DataTable';
import { FilterFields } from '../components/FilterFields';
import { JsonBlock } from '../components/JsonBlock';
import { ReadState } from '../components/ReadState';
import { Pager } from '../components/Pager';
import { query } from '../lib/api';
import { useList } from '../lib/use-list';
import { when } from '../lib/format';
import { useUrlState } from '../lib/url-state';

type AuditEvent = { id: string; action: string; actor_token_id: string | null; actor_member_id: string | null; resource_type: string; resource_id: string; project_id: string | null; before_version: number | null; after_version: number | null; detail: Record<string, unknown> | null; created_at: number };
const FILTERS = [['q', 'Search'], ['action', 'Action (projects.create)'], ['actor', 'Actor (token or member id)'], ['from', 'From'], ['to', 'To']] as const;

/** The audit log with its filters in the URL. */
export function Audit() {
  const [params, setParams] = useUrlState();
  const [draft, setDraft] = useState<Record<string, string>>(params);
  const list = useList<AuditEvent>('audit', `/audit_events${query({ q: params.q, action: params.action, actor: params.actor, from: params.from, to: params.to, limit: 50 })}`, 'cursor');
  const page = list.read;
  const apply = (event: FormEvent) => {
    event.preventDefault();
    setParams(Object.assign({ audit_after: null }, ...FILTERS.map(([name]) => ({ [name]: draft[name] ?? null }))));
  };
  const columns: ColumnDef<AuditEvent, unknown>[] = [
    { header: 'Time', cell: ({ row }) => when(row.original.created_at) }, { header: 'Action', accessorKey: 'action' },
    { header: 'Resource', cell: ({ row }) => `${row.original.resource_type} ${row.original.resource_id}` },
    { header: 'Actor', cell: ({ row }) => row.original.actor_token_id ?? row.original.actor_member_id ?? '—' },
    { header: 'Version', cell: ({ row }) => `${row.original.before_version ?? '—'} → ${row.original.after_version ?? '—'}` },
    { header: 'Detail', cell: ({ row }) => (row.original.detail ? <JsonBlock summary="detail" value={row.original.detail} /> : '—') },
  ];
  return (
    <>
      <h1>Audit log</h1>
      <form className="filters" onSubmit={apply} aria-label="Audit log filters">
        <FilterFields prefix="a" fields={FILTERS} draft={draft} onChange={setDraft} />
        <button type="submit">Apply filters</button>
      </form>
      <ReadState read={page} what="the audit log">
        {(data) => <><DataTable caption="Audit events, newest first" columns={columns} rows={data.data} /><Pager page={data} what="audit events" {...list} /></>}
      </ReadState>
    </>
  );
}
