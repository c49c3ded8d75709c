import { useState, type FormEvent } from 'react';
import type { ColumnDef } from '@tanstack/react-table';
import { DataTable } from '../components/DataTable';
import { JsonBlock } from '../components/JsonBlock';
import { ReadState } from '../components/ReadState';
import { Pager } from '../components/Pager';
import { api, get } from '../lib/api';
import { useList } from '../lib/use-list';
import { useAction } from '../lib/act';
import { when } from '../lib/format';
import { useRead } from '../lib/use-read';

type Connection = { id: string; version: number; kind: string; name: string; status: string; base_url: string; has_credential: boolean; credential_updated_at: number | null; fallback_secret_count: number };
type Route = {
  id: string; slug: string; strategy: string; max_retries: number; batch_mode: 'native' | 'gateway'; targets: Array<{ connection_id: string; model: string; weight?: number }>;
  rules: unknown[]; failover: Record<string, string>;
};

/** Provider connections (add with validation, replace a credential, status) and routes with their failure-kind matrix. */
export function Connections() {
  const connectionList = useList<Connection>('connections', '/provider_connections?limit=100');
  const routeList = useList<Route>('routes', '/routes?limit=100');
  const connections = connectionList.read;
  const routes = routeList.read;
  // Route targets by connection name, from the list this page reads anyway.
  const connectionNames = new Map((connections.data?.data ?? []).map((c) => [c.id, c.name]));
  const kinds = useRead('kinds', () => get<{ data: Array<{ id: string; name?: string }> }>('/provider_kinds'));
  const action = useAction(() => connections.refresh());
  const [form, setForm] = useState({ kind: 'openai', name: '', secret: '', base_url: '' });

  const add = (event: FormEvent) => {
    event.preventDefault();
    void action.run(async () => {
      await api('POST', '/provider_connections', {
        body: { kind: form.kind, name: form.name, secret: form.secret, validate: true, ...(form.base_url && { config: { base_url: form.base_url } }) },
        idempotencyKey: crypto.randomUUID(),
      });
      setForm({ ...form, name: '', secret: '' });
    });
  };
  /** The connection whose credential is being replaced, in a form below the table (never a browser prompt). */
  const [replacing, setReplacing] = useState<{ connection: Connection; secret: string } | null>(null);
  const replace = (event: FormEvent) => {
    event.preventDefault();
    if (!replacing) return;
    void action.run(async () => {
      await api('POST', `/provider_connections/${replacing.connection.id}/credential`, { body: { secret: replacing.secret, validate: true } });
      setReplacing(null);
    });
  };

  const columns: ColumnDef<Connection, unknown>[] = [
    { header: 'Name', accessorKey: 'name' },
    { header: 'Kind', accessorKey: 'kind' },
    { header: 'Status', accessorKey: 'status' },
    { header: 'Base URL', accessorKey: 'base_url' },
    { header: 'Credential', cell: ({ row }) => (row.original.has_credential ? `set ${when(row.original.credential_updated_at)}${row.original.fallback_secret_count ? ` (+${row.original.fallback_secret_count} pooled)` : ''}` : 'none') },
    { header: 'Actions', cell: ({ row }) => <button type="button" onClick={() => setReplacing({ connection: row.original, secret: '' })} aria-label={`Replace credential of ${row.original.name}`}>Replace credential</button> },
  ];

  return (
    <>
      <h1>Connections and routes</h1>
      {action.error && <p role="alert" className="error">{action.error}</p>}
      <form className="inline" onSubmit={add} aria-label="Add a connection">
        <label htmlFor="c-kind">Kind</label>
        <select id="c-kind" value={form.kind} onChange={(e) => setForm({ ...form, kind: e.target.value })}>
          {(kinds.data?.data ?? [{ id: 'openai' }]).map((k) => <option key={k.id} value={k.id}>{k.name ?? k.id}</option>)}
        </select>
        <label htmlFor="c-name">Name</label>
        <input id="c-name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required />
        <label htmlFor="c-secret">Credential</label>
        <input id="c-secret" type="password" autoComplete="off" value={form.secret} onChange={(e) => setForm({ ...form, secret: e.target.value })} required />
        <label htmlFor="c-base">Base URL (optional)</label>
        <input id="c-base" value={form.base_url} onChange={(e) => setForm({ ...form, base_url: e.target.value })} />
        <button type="submit">Add and validate</button>
      </form>
      <ReadState read={connections} what="connections">{(page) => <><DataTable caption="Provider connections" columns={columns} rows={page.data} /><Pager page={page} what="connections" {...connectionList} /></>}</ReadState>
      {replacing && (
        <form className="inline" onSubmit={replace} aria-label={`New credential of ${replacing.connection.name}`}>
          <h3>New credential of {replacing.connection.name}</h3>
          <label htmlFor="c-new-secret">Credential (checked with the provider before it is stored)</label>
          <input id="c-new-secret" type="password" autoComplete="off" value={replacing.secret} onChange={(e) => setReplacing({ ...replacing, secret: e.target.value })} required autoFocus />
          <button type="submit">Replace and validate</button>
          <button type="button" onClick={() => setReplacing(null)}>Cancel</button>
        </form>
      )}
      <h2>Routes</h2>
      <ReadState read={routes} what="routes">
        {(page) => page.data.length === 0 ? <p>No routes.</p> : (
          <>
            {page.data.map((r) => (
              <section key={r.id} aria-labelledby={`r-${r.id}`} className="route">
                <h3 id={`r-${r.id}`}>{r.slug} <small>({r.strategy}, {r.max_retries} retries, batches run by {r.batch_mode === 'gateway' ? 'the gateway' : 'the provider where it can'})</small></h3>
                {r.rules.length > 0 && <JsonBlock summary={`${r.rules.length} routing rule(s)`} value={r.rules} />}
                <table className="data">
                  <caption>Targets of {r.slug}</caption>
                  <thead><tr><th scope="col">#</th><th scope="col">Connection</th><th scope="col">Model</th><th scope="col">Weight</th></tr></thead>
                  <tbody>{r.targets.map((t, i) => <tr key={i}><td>{i + 1}</td><td><span title={t.connection_id}>{connectionNames.get(t.connection_id) ?? t.connection_id}</span></td><td>{t.model}</td><td>{t.weight ?? '—'}</td></tr>)}</tbody>
                </table>
                <table className="data">
                  <caption>What {r.slug} does on each failure kind</caption>
                  <thead><tr><th scope="col">Failure kind</th><th scope="col">Action</th></tr></thead>
                  <tbody>{Object.entries(r.failover).map(([kind, act]) => <tr key={kind}><td>{kind}</td><td>{act}</td></tr>)}</tbody>
                </table>
              </section>
            ))}
            <Pager page={page} what="routes" {...routeList} />
          </>
        )}
      </ReadState>
    </>
  );
}
