import { useState } from 'react';
import type { ColumnDef } from '@tanstack/react-table';
import { DataTable } from '../components/DataTable';
import { JsonBlock } from '../components/JsonBlock';
import { ReadState } from '../components/ReadState';
import { Pager } from '../components/Pager';
import { api } from '../lib/api';
import { useList } from '../lib/use-list';
import { useAction } from '../lib/act';

type Tool = {
  id: string; version: number; server_id: string; upstream_name: string; exposed_name: string | null; state: string; suggested_class: string;
  definition: Record<string, unknown>; definition_sha256: string; scan_findings: Array<{ kind: string; detail: string }>; listed: boolean;
};
const FIRST = ['pending', 'changed'];

/** The tool gateway's tools: those waiting for a decision first, each with its definition and hash; approve or block. */
export function Tools() {
  const toolList = useList<Tool>('tools', '/mcp_server_tools?limit=100');
  const tools = toolList.read;
  const action = useAction(() => tools.refresh());
  const [classes, setClasses] = useState<Record<string, string>>({});
  const approve = (t: Tool) => void action.run(() => api('POST', `/mcp_server_tools/${t.id}/approve`, {
    body: { access_class: classes[t.id] ?? t.suggested_class, expected_sha256: t.definition_sha256 }, ifMatch: `"${t.version}"`,
  }));
  const block = (t: Tool) => void action.run(() => api('POST', `/mcp_server_tools/${t.id}/block`, { body: {}, ifMatch: `"${t.version}"` }));
  const columns: ColumnDef<Tool, unknown>[] = [
    { header: 'Tool', cell: ({ row }) => `${row.original.upstream_name}${row.original.exposed_name ? ` (as ${row.original.exposed_name})` : ''}` },
    { header: 'Server', accessorKey: 'server_id' },
    { header: 'State', accessorKey: 'state' },
    { header: 'Definition', cell: ({ row }) => <JsonBlock summary={`sha256 ${row.original.definition_sha256.slice(0, 12)}…`} value={row.original.definition} /> },
    { header: 'Scan', cell: ({ row }) => row.original.scan_findings.map((f) => f.kind).join(', ') || 'clean' },
    {
      header: 'Decide',
      cell: ({ row }) => {
        const t = row.original;
        if (!FIRST.includes(t.state)) return t.state === 'blocked' ? 'blocked' : '—';
        return (
          <span className="actions">
            <label htmlFor={`cls-${t.id}`}>Access</label>
            <select id={`cls-${t.id}`} value={classes[t.id] ?? t.suggested_class} onChange={(e) => setClasses({ ...classes, [t.id]: e.target.value })}>
              <option value="read">read</option><option value="write">write</option>
            </select>
            <button type="button" onClick={() => approve(t)} aria-label={`Approve ${t.upstream_name}`}>Approve</button>
            <button type="button" onClick={() => block(t)} aria-label={`Block ${t.upstream_name}`}>Block</button>
          </span>
        );
      },
    },
  ];
  return (
    <>
      <h1>Tool gateway</h1>
      {action.error && <p role="alert" className="error">{action.error}</p>}
      <ReadState read={tools} what="tools">
        {(page) => (
          <>
            <DataTable caption="Tools, those waiting for a decision first" columns={columns} rows={[...page.data].sort((a, b) => Number(FIRST.includes(b.state)) - Number(FIRST.includes(a.state)))} />
            <Pager page={page} what="tools" {...toolList} />
          </>
        )}
      </ReadState>
    </>
  );
}
