import type { ColumnDef } from '@tanstack/react-table';
import { Link } from 'wouter';
import { DataTable } from '../components/DataTable';
import { ReadState } from '../components/ReadState';
import { Pager } from '../components/Pager';
import { get, query } from '../lib/api';
import { useList } from '../lib/use-list';
import { usd, when } from '../lib/format';
import { useUrlState } from '../lib/url-state';
import { useNames } from '../lib/names';
import { useRead } from '../lib/use-read';
import type { Job, JobDetail as Detail } from '../lib/types';

const STATUSES = ['', 'queued', 'running', 'succeeded', 'failed', 'canceled'] as const;

/** Asynchronous jobs with a status filter in the URL. */
export function Jobs() {
  const [params, setParams] = useUrlState();
  const list = useList<Job>('jobs', `/jobs${query({ status: params.status, limit: 50 })}`);
  const page = list.read;
  const columns: ColumnDef<Job, unknown>[] = [
    { header: 'Job', cell: ({ row }) => <Link href={`/jobs/${row.original.id}`}>{row.original.id}</Link> },
    { header: 'Status', accessorKey: 'status' },
    { header: 'Model', accessorKey: 'model' },
    { header: 'Provider', cell: ({ row }) => row.original.provider ?? '—' },
    { header: 'Progress', cell: ({ row }) => `${Math.round(row.original.progress * 100)}%` },
    { header: 'Created', cell: ({ row }) => when(row.original.created_at) },
    { header: 'Cost', cell: ({ row }) => usd(row.original.usage?.cost) },
  ];
  return (
    <>
      <h1>Jobs</h1>
      <form className="inline" aria-label="Job filters" onSubmit={(e) => e.preventDefault()}>
        <label htmlFor="j-status">Status</label>
        <select id="j-status" value={params.status ?? ''} onChange={(e) => setParams({ status: e.target.value, jobs_after: null })}>
          {STATUSES.map((s) => <option key={s} value={s}>{s || 'any'}</option>)}
        </select>
      </form>
      <ReadState read={page} what="jobs">
        {(data) => <><DataTable caption="Jobs, newest first" columns={columns} rows={data.data} /><Pager page={data} what="jobs" {...list} /></>}
      </ReadState>
    </>
  );
}

/** One job's timeline, with a link to its workflow in the Temporal UI. */
export function JobDetail({ id }: { id: string }) {
  const read = useRead(id, () => get<Detail>(`/jobs/${encodeURIComponent(id)}`));
  const connections = useNames('connection');
  const keys = useNames('key');
  return (
    <>
      <h1>Job <code>{id}</code></h1>
      <ReadState read={read} what="this job">
        {(job) => (
          <>
            <dl className="facts">
              <dt>Status</dt><dd>{job.status}{job.error ? ` (${job.error.type}: ${job.error.message})` : ''}</dd>
              <dt>Model</dt><dd>{job.model} {job.provider ? <>on {job.provider} ({connections.show(job.connection)})</> : ''}</dd>
              <dt>Key</dt><dd>{keys.show(job.key_id)}</dd>
              <dt>Status checks</dt><dd>{job.status_checks}</dd>
              <dt>Cost</dt><dd>{usd(job.usage?.cost)}</dd>
              <dt>Workflow</dt>
              <dd>{job.workflow.url ? <a href={job.workflow.url} target="_blank" rel="noreferrer">{job.workflow.id} in the Temporal UI</a> : <code>{job.workflow.id}</code>}</dd>
            </dl>
            <h2>Timeline</h2>
            <ol className="timeline">
              {job.timeline.map((e, i) => <li key={i}><time dateTime={new Date(e.at * 1000).toISOString()}>{when(e.at)}</time> <strong>{e.event}</strong> {e.detail}</li>)}
            </ol>
          </>
        )}
      </ReadState>
    </>
  );
}
