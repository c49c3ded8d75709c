import type { ColumnDef } from '@tanstack/react-table';
import { Link } from 'wouter';
import { DataTable } from '../components/DataTable';
import { Pager } from '../components/Pager';
import { ReadState } from '../components/ReadState';
import { get } from '../lib/api';
import { usd, when } from '../lib/format';
import { useList } from '../lib/use-list';
import { useNames } from '../lib/names';
import { useRead } from '../lib/use-read';
import type { Batch, BatchDetail as Detail, BatchItem } from '../lib/types';

const progressOf = (b: Batch) => `${Math.round(b.progress * 100)}% (${Math.round(b.progress * b.request_counts.total)} of ${b.request_counts.total})`;
/** Who runs the items: a provider's batch API (at its batch price) or the gateway's own request path. */
const runBy = (b: Batch) => (b.run_by === 'provider' ? 'Provider batch API' : 'Gateway');

/** Batches of both wires (issue 56), newest first, with their progress and what their items cost. */
export function Batches() {
  const list = useList<Batch>('batches', '/batches?limit=50');
  const keys = useNames('key');
  const columns: ColumnDef<Batch, unknown>[] = [
    { header: 'Batch', cell: ({ row }) => <Link href={`/batches/${row.original.id}`}>{row.original.id}</Link> },
    { header: 'Status', accessorKey: 'status' },
    { header: 'Endpoint', accessorKey: 'endpoint' },
    { header: 'Run by', cell: ({ row }) => runBy(row.original) },
    { header: 'Key', cell: ({ row }) => keys.show(row.original.key_id) },
    { header: 'Progress', cell: ({ row }) => progressOf(row.original) },
    { header: 'Failed', cell: ({ row }) => row.original.request_counts.failed + row.original.request_counts.not_run },
    { header: 'Created', cell: ({ row }) => when(row.original.created_at) },
    { header: 'Cost', cell: ({ row }) => usd(row.original.cost) },
  ];
  return (
    <>
      <h1>Batches</h1>
      <ReadState read={list.read} what="batches">
        {(data) => <><DataTable caption="Batches, newest first" columns={columns} rows={data.data} /><Pager page={data} what="batches" {...list} /></>}
      </ReadState>
    </>
  );
}

/** One batch: its counts and cost, its workflow, and its items with what each cost. */
export function BatchDetail({ id }: { id: string }) {
  const read = useRead(id, () => get<Detail>(`/batches/${encodeURIComponent(id)}`));
  const items = useList<BatchItem>('items', `/batches/${encodeURIComponent(id)}/items?limit=100`);
  const keys = useNames('key');
  const columns: ColumnDef<BatchItem, unknown>[] = [
    { header: 'Line', accessorKey: 'line' },
    { header: 'custom_id', accessorKey: 'custom_id' },
    { header: 'Outcome', cell: ({ row }) => `${row.original.outcome}${row.original.status_code ? ` (${row.original.status_code})` : ''}` },
    { header: 'Request', cell: ({ row }) => (row.original.request_id ? <Link href={`/requests/${row.original.request_id}`}>{row.original.request_id}</Link> : '—') },
    { header: 'Calls', accessorKey: 'attempts' },
    { header: 'Cost', cell: ({ row }) => usd(row.original.cost) },
  ];
  return (
    <>
      <h1>Batch <code>{id}</code></h1>
      <ReadState read={read} what="this batch">
        {(batch) => (
          <dl className="facts">
            <dt>Status</dt><dd>{batch.status}</dd>
            <dt>Endpoint</dt><dd>{batch.endpoint} ({batch.wire === 'anthropic' ? 'Anthropic Message Batches' : 'OpenAI Batch API'})</dd>
            <dt>Key</dt><dd>{keys.show(batch.key_id)}</dd>
            <dt>Progress</dt><dd>{progressOf(batch)}: {batch.request_counts.completed} answered, {batch.request_counts.failed} errors, {batch.request_counts.not_run} not run</dd>
            <dt>Run by</dt><dd>{runBy(batch)}</dd>
            <dt>Re-run calls</dt><dd>{batch.rerun_count}</dd>
            <dt>Cost</dt><dd>{usd(batch.cost)}</dd>
            {batch.errors ? <><dt>Refused</dt><dd>{batch.errors.map((e) => `line ${e.line ?? '?'}: ${e.message}`).join('; ')}</dd></> : null}
            <dt>Workflow</dt>
            <dd>{batch.workflow.url ? <a href={batch.workflow.url} target="_blank" rel="noreferrer">{batch.workflow.id} in the Temporal UI</a> : <code>{batch.workflow.id}</code>}</dd>
          </dl>
        )}
      </ReadState>
      <h2>Items</h2>
      <ReadState read={items.read} what="this batch's items">
        {(data) => <><DataTable caption="Items in input order, with what each cost" columns={columns} rows={data.data} /><Pager page={data} what="items" {...items} /></>}
      </ReadState>
    </>
  );
}
