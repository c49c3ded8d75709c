import type { ColumnDef } from '@tanstack/react-table';
import { DataTable } from '../components/DataTable';
import { ReadState } from '../components/ReadState';
import { Pager } from '../components/Pager';
import { useList } from '../lib/use-list';
import { when } from '../lib/format';

type Endpoint = { id: string; url: string; description: string | null; events: string[]; secret_rotated_at: number | null };
type Delivery = { id: string; event_type: string; job_id: string | null; url: string; status: string; attempts: number; last_response_status: number | null; last_error: string | null; next_attempt_at: number | null; created_at: number };

/** Webhook endpoints and the delivery log. */
export function Webhooks() {
  const endpointList = useList<Endpoint>('endpoints', '/webhook_endpoints?limit=100');
  const deliveryList = useList<Delivery>('deliveries', '/webhook_deliveries?limit=100');
  const [endpoints, deliveries] = [endpointList.read, deliveryList.read];
  const endpointColumns: ColumnDef<Endpoint, unknown>[] = [
    { header: 'URL', accessorKey: 'url' }, { header: 'Events', cell: ({ row }) => row.original.events.join(', ') },
    { header: 'Description', cell: ({ row }) => row.original.description ?? '—' }, { header: 'Secret rotated', cell: ({ row }) => when(row.original.secret_rotated_at) },
  ];
  const deliveryColumns: ColumnDef<Delivery, unknown>[] = [
    { header: 'Created', cell: ({ row }) => when(row.original.created_at) }, { header: 'Event', accessorKey: 'event_type' },
    { header: 'To', accessorKey: 'url' }, { header: 'Status', accessorKey: 'status' }, { header: 'Attempts', accessorKey: 'attempts' },
    { header: 'Last answer', cell: ({ row }) => row.original.last_response_status ?? row.original.last_error ?? '—' },
    { header: 'Next attempt', cell: ({ row }) => when(row.original.next_attempt_at) },
  ];
  return (
    <>
      <h1>Webhooks</h1>
      <ReadState read={endpoints} what="webhook endpoints">{(page) => <><DataTable caption="Endpoints" columns={endpointColumns} rows={page.data} /><Pager page={page} what="endpoints" {...endpointList} /></>}</ReadState>
      <ReadState read={deliveries} what="the delivery log">{(page) => <><DataTable caption="Latest deliveries" columns={deliveryColumns} rows={page.data} /><Pager page={page} what="deliveries" {...deliveryList} /></>}</ReadState>
    </>
  );
}
