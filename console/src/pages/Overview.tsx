import { useMemo } from 'react';
import { Link } from 'wouter';
import { Chart } from '../components/Chart';
import { ReadState } from '../components/ReadState';
import { get, query, type ListPage } from '../lib/api';
import { bucketLabel, bucketStarts, count, usd } from '../lib/format';
import { useNames, type Names } from '../lib/names';
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
  const keyNames = useNames('key');
  const projectNames = useNames('project');
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
                  <span>{b.scope} {b.scope === 'key' ? keyNames.show(b.id) : b.scope === 'project' ? projectNames.show(b.id) : b.id} ({b.period}, {b.behavior})</span>
                  <meter min={0} max={b.limit} value={b.spent} aria-label={`${b.scope} ${b.scope === 'key' ? keyNames.text(b.id) : b.scope === 'project' ? projectNames.text(b.id) : b.id} spent of limit`} />
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
            const worstAdded = Math.max(0, ...report.data.map((b) => b.p95_added_ms ?? 0));
            // Every hour of the day, an hour without requests at zero.
            const hours = bucketStarts(since, Date.now() / 1000, 'hour');
            const at = new Map(report.data.map((b) => [b.bucket_start, b]));
            const of = (h: number) => at.get(h);
            return (
              <>
                <p className="headline">
                  Error rate <strong>{total > 0 ? ((errors / total) * 100).toFixed(1) : '0.0'}%</strong> ({count(errors)} of {count(total)} requests);
                  added by the gateway, p95 <strong>{worstAdded} ms</strong> in its slowest hour (the rest is the providers' time).
                </p>
                <Chart label="Requests, errors and p95 latency per hour over the last 24 hours" summary={`${count(total)} requests, ${count(errors)} errors (error rate ${total > 0 ? ((errors / total) * 100).toFixed(1) : '0.0'}%); the slowest hour's p95 ${worst} ms, of which the gateway added at most ${worstAdded} ms`} config={{
                  type: 'bar',
                  data: {
                    labels: hours.map((h) => bucketLabel(h, 'hour')),
                    datasets: [
                      { label: 'requests', data: hours.map((h) => (of(h)?.requests ?? 0) - (of(h)?.errors ?? 0)), yAxisID: 'y', stack: 'r' },
                      { label: 'errors', data: hours.map((h) => of(h)?.errors ?? 0), yAxisID: 'y', stack: 'r', backgroundColor: '#c62828' },
                      { label: 'p95 latency (ms)', data: hours.map((h) => of(h)?.p95_latency_ms ?? null), yAxisID: 'ms', type: 'line' },
                      { label: 'p95 added by the gateway (ms)', data: hours.map((h) => of(h)?.p95_added_ms ?? null), yAxisID: 'ms', type: 'line' },
                    ],
                  },
                  options: { scales: { y: { position: 'left', stacked: true }, ms: { position: 'right' } } },
                }} />
              </>
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
        <ReadState read={byKey} what="usage by key">{(report) => <TopList title="Keys" report={report} field="key" names={keyNames} />}</ReadState>
      </section>
    </>
  );
}

function TopList({ title, report, field, names }: { title: string; report: UsageReport; field: string; names?: Names }) {
  const totals = new Map<string, number>();
  for (const b of report.data) {
    const name = b.group?.[field] ?? '(none)';
    totals.set(name, (totals.get(name) ?? 0) + b.cost);
  }
  const top = [...totals].sort((a, b) => b[1] - a[1]).slice(0, 5);
  return (
    <div>
      <h3>{title}</h3>
      <ol>{top.map(([name, cost]) => <li key={name}>{names ? names.show(name) : name}: {usd(cost)}</li>)}</ol>
    </div>
  );
}
