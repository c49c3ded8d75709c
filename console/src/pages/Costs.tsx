import { useState, type FormEvent } from 'react';
import type { ColumnDef } from '@tanstack/react-table';
import { Chart } from '../components/Chart';
import { DataTable } from '../components/DataTable';
import { JsonBlock } from '../components/JsonBlock';
import { Pager } from '../components/Pager';
import { ReadState } from '../components/ReadState';
import { api, get, type ListPage } from '../lib/api';
import { useAction } from '../lib/act';
import { dollarAxis, usd, when } from '../lib/format';
import { useList } from '../lib/use-list';
import { useRead } from '../lib/use-read';

type Center = { id: string; version: number; name: string; code: string; owner_email: string | null; archived: boolean };
type Rule = { id: string; version: number; version_id: string; priority: number; match: Record<string, unknown>; note: string | null; cost_center_id: string | null; allocation: Array<{ cost_center_id: string; percent: number }> | null };
type RuleVersion = { id: string; version: number; ended: boolean; priority: number; effective_at: number; actor_token_id: string | null; cost_center_id: string | null; allocation: unknown };
type Commitment = {
  id: string; provider_kind: string; label: string; amount_usd: number; period_start: number | string; period_end: number | string; discount_pct: number | null;
  consumed_usd: number; remaining_usd: number; burn_rate_usd_per_day: number; projected_exhaustion_at: number | string | null; projected_unused_usd: number;
};

const asUnix = (v: number | string | null) => (v === null ? null : typeof v === 'number' ? v : Math.floor(Date.parse(v) / 1000));

/** One rule's versions, read when asked for (one request, on the click). */
function Versions({ rule }: { rule: Rule }) {
  const [open, setOpen] = useState(false);
  const read = useRead(open ? `versions:${rule.id}` : null, () => get<ListPage<RuleVersion>>(`/cost_center_rules/${rule.id}/versions?limit=100`));
  if (!open) return <button type="button" onClick={() => setOpen(true)} aria-label={`Versions of rule ${rule.id}`}>Versions</button>;
  return (
    <ReadState read={read} what="versions">
      {(page) => <ol className="versions">{page.data.map((v) => <li key={v.id}>v{v.version} {when(v.effective_at)} {v.ended ? 'ended' : `priority ${v.priority}`} by {v.actor_token_id ?? '—'}</li>)}</ol>}
    </ReadState>
  );
}

/** Cost centers, their rules (versions listed), and commitments with burn-down and projected exhaustion. */
export function Costs() {
  const centerList = useList<Center>('centers', '/cost_centers?limit=100');
  const ruleList = useList<Rule>('rules', '/cost_center_rules?limit=100');
  const commitmentList = useList<Commitment>('commitments', '/commitments?limit=100');
  const [centers, rules, commitments] = [centerList.read, ruleList.read, commitmentList.read];
  const action = useAction(() => centers.refresh());
  const [form, setForm] = useState({ name: '', code: '' });
  const nameOf = (id: string | null) => (id === null ? 'unallocated' : centers.data?.data.find((c) => c.id === id)?.name ?? id);

  const create = (event: FormEvent) => {
    event.preventDefault();
    void action.run(async () => {
      await api('POST', '/cost_centers', { body: form, idempotencyKey: crypto.randomUUID() });
      setForm({ name: '', code: '' });
    });
  };
  const centerColumns: ColumnDef<Center, unknown>[] = [
    { header: 'Name', accessorKey: 'name' }, { header: 'Code', accessorKey: 'code' },
    { header: 'Owner', cell: ({ row }) => row.original.owner_email ?? '—' }, { header: 'State', cell: ({ row }) => (row.original.archived ? 'archived' : 'active') },
    { header: 'Id', cell: ({ row }) => <code>{row.original.id}</code> },
  ];
  const ruleColumns: ColumnDef<Rule, unknown>[] = [
    { header: 'Priority', accessorKey: 'priority' },
    { header: 'Match', cell: ({ row }) => <JsonBlock summary={Object.keys(row.original.match).join(', ') || 'every request'} value={row.original.match} /> },
    { header: 'Charged to', cell: ({ row }) => (row.original.allocation ? row.original.allocation.map((a) => `${nameOf(a.cost_center_id)} ${a.percent}%`).join(', ') : nameOf(row.original.cost_center_id)) },
    { header: 'Version', cell: ({ row }) => `v${row.original.version}` },
    { header: 'History', cell: ({ row }) => <Versions rule={row.original} /> },
  ];
  const commitmentColumns: ColumnDef<Commitment, unknown>[] = [
    { header: 'Label', accessorKey: 'label' }, { header: 'Provider', accessorKey: 'provider_kind' },
    { header: 'Period', cell: ({ row }) => `${when(asUnix(row.original.period_start)).slice(0, 10)} to ${when(asUnix(row.original.period_end)).slice(0, 10)}` },
    { header: 'Amount', cell: ({ row }) => usd(row.original.amount_usd) }, { header: 'Consumed', cell: ({ row }) => usd(row.original.consumed_usd) },
    { header: 'Remaining', cell: ({ row }) => usd(row.original.remaining_usd) }, { header: 'Burn / day', cell: ({ row }) => usd(row.original.burn_rate_usd_per_day) },
    { header: 'Runs out', cell: ({ row }) => (row.original.projected_exhaustion_at ? when(asUnix(row.original.projected_exhaustion_at)) : 'not before period end') },
    { header: 'Unused at end', cell: ({ row }) => usd(row.original.projected_unused_usd) },
  ];

  return (
    <>
      <h1>Cost attribution</h1>
      {action.error && <p role="alert" className="error">{action.error}</p>}
      <h2>Cost centers</h2>
      <form className="inline" onSubmit={create} aria-label="Create a cost center">
        <label htmlFor="cc-name">Name</label>
        <input id="cc-name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required maxLength={80} />
        <label htmlFor="cc-code">Code</label>
        <input id="cc-code" value={form.code} onChange={(e) => setForm({ ...form, code: e.target.value })} required maxLength={40} pattern="[A-Za-z0-9._-]+" />
        <button type="submit">Create cost center</button>
      </form>
      <ReadState read={centers} what="cost centers">{(page) => <><DataTable caption="Cost centers" columns={centerColumns} rows={page.data} /><Pager page={page} what="cost centers" {...centerList} /></>}</ReadState>
      <h2>Rules, first match by priority</h2>
      <ReadState read={rules} what="cost-center rules">{(page) => <><DataTable caption="Cost-center rules" columns={ruleColumns} rows={[...page.data].sort((a, b) => a.priority - b.priority)} /><Pager page={page} what="rules" {...ruleList} /></>}</ReadState>
      <h2>Commitments</h2>
      <ReadState read={commitments} what="commitments">
        {(page) => (
          <>
            {page.data.length > 0 && (
              <Chart label="Commitments: consumed and remaining" summary={page.data.map((c) => `${c.label}: ${usd(c.consumed_usd)} of ${usd(c.amount_usd)}`).join('; ')} config={{
                type: 'bar',
                data: { labels: page.data.map((c) => c.label), datasets: [{ label: 'consumed', data: page.data.map((c) => c.consumed_usd) }, { label: 'remaining', data: page.data.map((c) => c.remaining_usd) }] },
                options: { indexAxis: 'y', scales: { x: { stacked: true, ...dollarAxis }, y: { stacked: true } }, plugins: { tooltip: { callbacks: { label: (item) => `${item.dataset.label ?? ''}: ${usd(item.parsed.x ?? 0)}` } } } },
              }} />
            )}
            <DataTable caption="Commitments" columns={commitmentColumns} rows={page.data} />
            <Pager page={page} what="commitments" {...commitmentList} />
          </>
        )}
      </ReadState>
    </>
  );
}
