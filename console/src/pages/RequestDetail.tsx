import { Chart } from '../components/Chart';
import { ReadState } from '../components/ReadState';
import { get } from '../lib/api';
import { count, protocolOf, usd, when } from '../lib/format';
import { useNames } from '../lib/names';
import { useRead } from '../lib/use-read';
import type { RequestLog } from '../lib/types';

/** One request: its attempts as a waterfall, route, cache and guardrail outcomes, cost and allocation. */
export function RequestDetail({ id }: { id: string }) {
  const read = useRead(id, () => get<RequestLog>(`/requests/${encodeURIComponent(id)}`));
  const keys = useNames('key');
  const connections = useNames('connection');
  const projects = useNames('project');
  return (
    <>
      <h1>Request <code>{id}</code></h1>
      <ReadState read={read} what="this request">
        {(r) => {
          // Attempts ran one after another: each bar starts where the previous ended.
          let start = 0;
          const spans = r.attempts.map((a) => {
            const span: [number, number] = [start, start + a.latency_ms];
            start += a.latency_ms;
            return span;
          });
          return (
            <>
              <dl className="facts">
                <dt>Time</dt><dd>{when(r.created_at)}</dd>
                <dt>Protocol</dt><dd>{protocolOf(r.endpoint)} <code>{r.endpoint}</code></dd>
                <dt>Status</dt><dd>{r.status}{r.error ? ` (${r.error.type}${r.error.code ? `, ${r.error.code}` : ''})` : ''}</dd>
                <dt>Model asked</dt><dd>{r.model ?? '—'}</dd>
                <dt>Route</dt><dd>{r.route ?? '—'} {r.chain_position ? `(${r.chain_position})` : ''}</dd>
                <dt>Key</dt><dd>{keys.show(r.key_id)} in {projects.show(r.project_id)}</dd>
                <dt>Served by</dt><dd>{r.provider ?? '—'} {r.served_model ?? ''} {r.connection_id ? <>on {connections.show(r.connection_id)}</> : ''}</dd>
                <dt>Latency</dt><dd>{r.latency_ms} ms</dd>
                <dt>Tokens</dt><dd>{r.usage ? `${count(r.usage.prompt_tokens)} in, ${count(r.usage.completion_tokens)} out` : '—'}</dd>
                <dt>Cost</dt><dd>{usd(r.estimated_cost)} {r.price_source ? `(${r.price_source})` : ''}</dd>
                <dt>Cache</dt><dd>{r.cache.status ?? 'off'}</dd>
                <dt>Guardrails</dt><dd>{r.guardrails ? `${r.guardrails.action}: ${r.guardrails.findings.map((f) => `${f.detector} ${f.action}`).join(', ') || 'nothing found'}` : 'none'}</dd>
                <dt>Allocation</dt>
                <dd>{r.allocation.shares.map((s) => `${s.cost_center_id ?? 'unallocated'} ${s.percent}% ${usd(s.cost)}`).join('; ')} {r.allocation.rule_version_id ? `(rule version ${r.allocation.rule_version_id})` : ''}</dd>
                <dt>Trace</dt><dd>{r.trace_url ? <a href={r.trace_url} target="_blank" rel="noreferrer">{r.trace_id} in the tracing UI</a> : r.trace_id ? <code>{r.trace_id}</code> : '—'}</dd>
                <dt>Tags</dt><dd>{Object.entries(r.metadata.tags).map(([k, v]) => `${k}=${v}`).join(', ') || '—'}</dd>
              </dl>
              <h2>Attempts</h2>
              <Chart label={`Attempts of request ${r.id} as a waterfall`} summary={r.attempts.map((a) => `${a.position} ${connections.text(a.connection_id)} ${a.provider} ${a.outcome} ${a.status ?? ''} ${a.latency_ms} ms`).join('; ')} config={{
                type: 'bar',
                data: {
                  labels: r.attempts.map((a) => `${a.position} ${a.provider}`),
                  datasets: [{ label: 'milliseconds', data: spans, backgroundColor: r.attempts.map((a) => (a.outcome === 'ok' ? '#2e7d32' : '#c62828')) }],
                },
                options: { indexAxis: 'y', plugins: { legend: { display: false } } },
              }} />
              <table className="data">
                <caption>Attempts in order</caption>
                <thead><tr><th scope="col">Position</th><th scope="col">Connection</th><th scope="col">Model</th><th scope="col">Outcome</th><th scope="col">Status</th><th scope="col">Latency</th></tr></thead>
                <tbody>
                  {r.attempts.map((a, i) => (
                    <tr key={i} className="attempt"><td>{a.position}</td><td>{connections.show(a.connection_id)} ({a.provider})</td><td>{a.model}</td><td>{a.failure_kind ?? 'ok'}</td><td>{a.status ?? '—'}</td><td>{a.latency_ms} ms</td></tr>
                  ))}
                </tbody>
              </table>
            </>
          );
        }}
      </ReadState>
    </>
  );
}
