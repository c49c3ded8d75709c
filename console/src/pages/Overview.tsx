import { useMemo } from 'react';
import { Link } from 'wouter';
import { Chart } from '../components/Chart';
import { ReadState } from '../components/ReadState';
import { get, query, type ListPage } from '../lib/api';
import { bucketLabel, count, usd } from '../lib/format';
import { useRead } from '../lib/use-read';
import type { BudgetStatus, Finding, RequestStats, UsageReport } from '../lib/types';

const DAY = 86_400;

/** Spend against every enforced limit, the last day by hour, open findings, and the top models and keys by cost. */
export function Overview() {
  const since = useMemo(() => Math.floor(Date.now() / 1000 / 3600) * 3600 - DAY, []);
  const budgets = useRead('budgets', () => get<ListPage<BudgetStatus>>('/budget_status'));
  const stats = useRead('stats', () => get<{ data: RequestStats[] }>(`/request_stats${query({ from: since })}`));
  const findings = useRead('findings', () => get<ListPage<Finding>>(`/findings${query({ status: 'open', limit: 5 })}`));
  const byModel = useRead('models', () => get<UsageReport>(`/usage${query({ bucket: 'day', from: since - 29 * DAY, group_by: 'model' })}`));
  const byKey = useRead('keys', () => get<UsageReport>(`/usage${query({ bucket: 'day', from: since - 29 * DAY, group_by: 'key' })}`));
  return (
    <>
      <h1>Overview</h1>
      <section aria-labelledby="limits">
        <h2 id="limits">Spend against limits</h2>
        <ReadState read={budgets} what="budget status">
          {(page) => page.data.length === 0 ? <p>No limit is enforced.</p> : (
            <ul className="meters">
              {page.data.map((b) => (
                <li key={`${b.scope}:${b.id}`}>
                  <span>{b.scope} {b.id} ({b.period}, {b.behavior})</span>
                  <meter min={0} max={b.limit} value={b.spent} aria-label={`${b.scope} ${b.id} spent of limit`} />
                  <span>{usd(b.spent)} of {usd(b.limit)}</span>
                </li>
              ))}
            </ul>
          )}
        </ReadState>
      </section>
      <section aria-labelledby="day">
        <h2 id="day">The last 24 hours</h2>
        <ReadState read={stats} what="request statistics">
          {(report) => {
            const total = report.data.reduce((s, b) => s + b.requests, 0);
            const errors = report.data.reduce((s, b) => s + b.errors, 0);
            const worst = Math.max(0, ...report.data.map((b) => b.p95_latency_ms ?? 0));
            return (
              <Chart label="Requests, errors and p95 latency per hour over the last 24 hours" summary={`${count(total)} requests, ${count(errors)} errors (error rate ${total > 0 ? ((errors / total) * 100).toFixed(1) : '0.0'}%); the slowest hour's p95 ${worst} ms`} config={{
                type: 'bar',
                data: {
                  labels: report.data.map((b) => bucketLabel(b.bucket_start, 'hour')),
                  datasets: [
                    { label: 'requests', data: report.data.map((b) => b.requests - b.errors), yAxisID: 'y', stack: 'r' },
                    { label: 'errors', data: report.data.map((b) => b.errors), yAxisID: 'y', stack: 'r', backgroundColor: '#c62828' },
                    { label: 'p95 latency (ms)', data: report.data.map((b) => b.p95_latency_ms), yAxisID: 'ms', type: 'line' },
                  ],
                },
                options: { scales: { y: { position: 'left', stacked: true }, ms: { position: 'right' } } },
              }} />
            );
          }}
        </ReadState>
      </section>
      <section aria-labelledby="open">
        <h2 id="open">Open findings</h2>
        <ReadState read={findings} what="findings">
          {(page) => page.data.length === 0 ? <p>No open findings.</p> : (
            <ul>{page.data.map((f) => <li key={f.id}><Link href={`/findings?status=open`}>{f.severity}: {f.title}</Link></li>)}</ul>
          )}
        </ReadState>
      </section>
      <section aria-labelledby="top" className="columns">
        <h2 id="top">Top by cost, last 30 days</h2>
        <ReadState read={byModel} what="usage by model">{(report) => <TopList title="Models" report={report} field="model" />}</ReadState>
        <ReadState read={byKey} what="usage by key">{(report) => <TopList title="Keys" report={report} field="key" />}</ReadState>
      </section>
    </>
  );
}

function TopList({ title, report, field }: { title: string; report: UsageReport; field: string }) {
  const totals = new Map<string, number>();
  for (const b of report.data) {
    const name = b.group?.[field] ?? '(none)';
    totals.set(name, (totals.get(name) ?? 0) + b.cost);
  }
  const top = [...totals].sort((a, b) => b[1] - a[1]).slice(0, 5);
  return (
    <div>
      <h3>{title}</h3>
      <ol>{top.map(([name, cost]) => <li key={name}>{name}: {usd(cost)}</li>)}</ol>
    </div>
  );
}
