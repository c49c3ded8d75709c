import { useMemo, useState } from 'react';
import type { ColumnDef } from '@tanstack/react-table';
import { Chart } from '../components/Chart';
import { DataTable } from '../components/DataTable';
import { ReadState } from '../components/ReadState';
import { get, query } from '../lib/api';
import { bucketLabel, bucketStarts, count, dollarAxis, dollarTooltip, usd, when } from '../lib/format';
import { useUrlState } from '../lib/url-state';
import { useRead } from '../lib/use-read';
import { useNames, type NameKind } from '../lib/names';
import type { UsageBucket, UsageReport } from '../lib/types';

const GROUPS = [['', 'nothing'], ['model', 'model'], ['provider', 'provider'], ['key', 'key'], ['project', 'project'], ['user_id', 'end user'], ['tags', 'a tag'], ['cost_center', 'cost center']] as const;
const SPANS = [['1', 'last day'], ['7', 'last 7 days'], ['30', 'last 30 days'], ['90', 'last 90 days']] as const;

/** CSV of what the table shows, made in the browser from the same answer (no second request). */
function downloadCsv(report: UsageReport, field: string): void {
  const header = ['bucket_start', field || 'group', 'requests', 'total_tokens', 'cost', 'unpriced_requests'];
  const lines = report.data.map((b) => [new Date(b.bucket_start * 1000).toISOString(), field ? b.group?.[field] ?? '' : '', b.requests, b.total_tokens, b.cost, b.unpriced_requests]
    .map((v) => (/[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v))).join(','));
  const url = URL.createObjectURL(new Blob([[header.join(','), ...lines].join('\r\n') + '\r\n'], { type: 'text/csv' }));
  const a = Object.assign(document.createElement('a'), { href: url, download: 'usage.csv' });
  a.click();
  URL.revokeObjectURL(url);
}

/** Groups whose values are ids of named objects. */
const NAMED_GROUPS: Record<string, NameKind> = { key: 'key', project: 'project', cost_center: 'cost_center' };

/** GET /usage with grouping and hour or day buckets, as a chart and a table. */
export function Usage() {
  const [params, setParams] = useUrlState();
  const field = params.group_by ?? '';
  const [tagKey, setTagKey] = useState(field.startsWith('tags.') ? field.slice(5) : '');
  const bucket = params.bucket === 'hour' ? 'hour' : 'day';
  const days = params.days ?? '7';
  const from = useMemo(() => Math.floor(Date.now() / 1000 / 3600) * 3600 - Number(days) * 86_400, [days]);
  const path = `/usage${query({ bucket, from, group_by: field || undefined })}`;
  const read = useRead(path, () => get<UsageReport>(path));
  // Keys, projects and cost centers by name: read only when grouping by them.
  const names = useNames(NAMED_GROUPS[field] ?? null);
  const noneLabel = field === 'cost_center' ? 'unallocated' : '(none)';

  const columns: ColumnDef<UsageBucket, unknown>[] = [
    { header: 'Bucket', cell: ({ row }) => when(row.original.bucket_start) },
    ...(field ? [{ header: field === 'cost_center' ? 'cost center' : field, cell: ({ row }: { row: { original: UsageBucket } }) => names.show(row.original.group?.[field], noneLabel) }] : []),
    { header: 'Requests', cell: ({ row }) => count(row.original.requests) },
    { header: 'Tokens', cell: ({ row }) => count(row.original.total_tokens) },
    { header: 'Cost', cell: ({ row }) => usd(row.original.cost) },
    { header: 'Unpriced', cell: ({ row }) => count(row.original.unpriced_requests) },
  ];

  return (
    <>
      <h1>Usage</h1>
      <form className="inline" aria-label="Usage view" onSubmit={(e) => e.preventDefault()}>
        <label htmlFor="u-group">Group by</label>
        <select id="u-group" value={field.startsWith('tags.') ? 'tags' : field} onChange={(e) => setParams({ group_by: e.target.value === 'tags' ? `tags.${tagKey || 'team'}` : e.target.value })}>
          {GROUPS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
        </select>
        {field.startsWith('tags.') && (
          <>
            <label htmlFor="u-tag">Tag key</label>
            <input id="u-tag" value={tagKey} onChange={(e) => setTagKey(e.target.value)} onBlur={() => tagKey && setParams({ group_by: `tags.${tagKey}` })} pattern="[A-Za-z0-9_.:-]{1,64}" />
          </>
        )}
        <label htmlFor="u-bucket">Bucket</label>
        <select id="u-bucket" value={bucket} onChange={(e) => setParams({ bucket: e.target.value })}>
          <option value="hour">hour</option><option value="day">day</option>
        </select>
        <label htmlFor="u-span">Span</label>
        <select id="u-span" value={days} onChange={(e) => setParams({ days: e.target.value })}>
          {SPANS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
        </select>
      </form>
      <ReadState read={read} what="usage">
        {(report) => {
          // Every bucket of the span, the empty ones at zero.
          const labels = bucketStarts(from, Date.now() / 1000, bucket);
          const groups = field ? [...new Set(report.data.map((b) => b.group?.[field] ?? null))] : [null];
          const costOf = (start: number, group: string | null) => report.data.filter((b) => b.bucket_start === start && (!field || (b.group?.[field] ?? null) === group)).reduce((s, b) => s + b.cost, 0);
          const nameOf = (g: string | null) => names.text(g, noneLabel);
          // Each group's share of the span's cost, said in words under the chart.
          const shares = field ? groups.map((g) => {
            const cost = labels.reduce((s, start) => s + costOf(start, g), 0);
            return `${nameOf(g)}: ${usd(cost)} (${report.totals.cost > 0 ? ((cost / report.totals.cost) * 100).toFixed(1) : '0.0'}%)`;
          }).join('; ') : '';
          return (
            <>
              <Chart label={`Cost per ${bucket}${field ? ` by ${field}` : ''}`} summary={`${count(report.totals.requests)} requests, ${usd(report.totals.cost)} in total over ${labels.length} ${bucket}s${shares ? `. ${shares}` : ''}`} config={{
                type: 'bar',
                data: {
                  labels: labels.map((s) => bucketLabel(s, bucket)),
                  datasets: groups.map((g) => ({ label: field ? nameOf(g) : 'cost', data: labels.map((s) => costOf(s, g)) })),
                },
                options: { scales: { x: { stacked: true }, y: { stacked: true, ...dollarAxis } }, plugins: { tooltip: dollarTooltip } },
              }} />
              <button type="button" onClick={() => downloadCsv(report, field)}>Download CSV</button>
              <DataTable caption="Usage buckets" columns={columns} rows={report.data} />
            </>
          );
        }}
      </ReadState>
    </>
  );
}
