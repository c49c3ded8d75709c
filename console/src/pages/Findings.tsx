import { useState } from 'react';
import { Chart } from '../components/Chart';
import { ReadState } from '../components/ReadState';
import { api, get, query, type ListPage } from '../lib/api';
import { when } from '../lib/format';
import { useUrlState } from '../lib/url-state';
import { useRead } from '../lib/use-read';
import type { Finding } from '../lib/types';

const STATUSES = ['open', 'acknowledged', 'resolved'] as const;

/** The findings inbox: by status, acknowledge, and a finding's evidence as a chart. */
export function Findings() {
  const [params, setParams] = useUrlState();
  const status = params.status ?? 'open';
  const page = useRead(`findings?${status}&${params.after ?? ''}`, () => get<ListPage<Finding>>(`/findings${query({ status, limit: 50, after: params.after })}`));
  const [error, setError] = useState<string | null>(null);
  const acknowledge = async (finding: Finding) => {
    setError(null);
    try {
      await api('POST', `/findings/${finding.id}/acknowledge`, { body: {} });
      page.refresh();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <>
      <h1>Findings</h1>
      <nav aria-label="Finding status" className="tabs">
        {STATUSES.map((s) => (
          <button key={s} type="button" aria-pressed={s === status} onClick={() => setParams({ status: s, after: null })}>{s}</button>
        ))}
      </nav>
      {error && <p role="alert" className="error">{error}</p>}
      <ReadState read={page} what="findings">
        {(list) => list.data.length === 0 ? <p>No {status} findings.</p> : (
          <ul className="findings">
            {list.data.map((f) => (
              <li key={f.id}>
                <article aria-labelledby={`t-${f.id}`}>
                  <h2 id={`t-${f.id}`}>{f.severity}: {f.title}</h2>
                  <p>{f.summary}</p>
                  <p className="meta">{f.type} · {f.scope.kind} {f.scope.id ?? ''} · first seen {when(f.first_seen_at)} · last seen {when(f.last_seen_at)} · {f.occurrences}×</p>
                  {f.observed !== null && f.expected !== null && (
                    <Chart label={`Observed against expected for ${f.title}`} summary={`observed ${f.observed}, expected ${f.expected}`} config={{
                      type: 'bar',
                      data: { labels: ['expected', 'observed'], datasets: [{ label: f.type, data: [f.expected, f.observed], backgroundColor: ['#607d8b', '#c62828'] }] },
                      options: { plugins: { legend: { display: false } } },
                    }} />
                  )}
                  {f.status === 'open' && <button type="button" onClick={() => void acknowledge(f)}>Acknowledge</button>}
                </article>
              </li>
            ))}
          </ul>
        )}
      </ReadState>
    </>
  );
}
