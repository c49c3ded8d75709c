import { useState, type FormEvent } from 'react';
import type { ColumnDef } from '@tanstack/react-table';
import { DataTable } from '../components/DataTable';
import { ReadState } from '../components/ReadState';
import { DEFAULT_RATE_LIMIT_RPM, RATE_LIMIT_TIERS } from '../../../core/ratelimit/tiers';
import { Pager } from '../components/Pager';
import { api, get, type ListPage } from '../lib/api';
import { useList } from '../lib/use-list';
import { when } from '../lib/format';
import { useRead } from '../lib/use-read';
import type { GatewayKey } from '../lib/types';

/** A secret the API shows once: shown here once, with a copy button, until dismissed. */
function RevealedSecret({ secret, onDone }: { secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  return (
    <div role="status" className="secret">
      <p>Copy this secret now: it is not shown again.</p>
      <code data-testid="secret">{secret}</code>
      <button type="button" onClick={() => void navigator.clipboard?.writeText(secret).then(() => setCopied(true))}>{copied ? 'Copied' : 'Copy secret'}</button>
      <button type="button" onClick={onDone}>Done</button>
    </div>
  );
}

type KeyAction = 'limit' | 'rate' | 'rotate';

const ACTION_TITLES: Record<KeyAction, string> = { limit: 'Monthly limit of', rate: 'Rate tier of', rotate: 'Rotate' };

/** One key's limit, rate tier or rotation, as a form (the page's own, never a browser prompt). */
function KeyActionForm({ editing, onChange, onSubmit, onCancel }: {
  editing: { key: GatewayKey; action: KeyAction; value: string };
  onChange(value: string): void;
  onSubmit(event: FormEvent): void;
  onCancel(): void;
}) {
  const { key, action, value } = editing;
  const title = `${ACTION_TITLES[action]} ${key.label}`;
  return (
    <form className="inline key-action" onSubmit={onSubmit} aria-label={title}>
      <h3>{title}</h3>
      {action === 'limit' && (
        <>
          <label htmlFor="key-action-value">Monthly limit in USD (empty: none)</label>
          <input id="key-action-value" type="number" min={0.01} step={0.01} value={value} onChange={(e) => onChange(e.target.value)} autoFocus />
        </>
      )}
      {action === 'rate' && (
        <>
          <label htmlFor="key-action-value">Requests a minute</label>
          <select id="key-action-value" value={value} onChange={(e) => onChange(e.target.value)} autoFocus>
            {RATE_LIMIT_TIERS.map((t) => <option key={t} value={t}>{t}</option>)}
          </select>
        </>
      )}
      {action === 'rotate' && (
        <>
          <label htmlFor="key-action-value">Seconds the old secret keeps working</label>
          <input id="key-action-value" type="number" min={0} step={1} value={value} onChange={(e) => onChange(e.target.value)} required autoFocus />
        </>
      )}
      <button type="submit">{action === 'rotate' ? 'Rotate' : 'Save'}</button>
      <button type="button" onClick={onCancel}>Cancel</button>
    </form>
  );
}

/** Gateway keys: create (secret once), rotate with overlap, disable; paged with the API's cursors. */
export function Keys() {
  const keyList = useList<GatewayKey>('keys', '/gateway_keys?limit=50');
  const keys = keyList.read;
  const projects = useRead('projects', () => get<ListPage<{ id: string; name: string }>>('/projects?limit=100'));
  const [secret, setSecret] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [label, setLabel] = useState('');
  const [project, setProject] = useState('');
  const [rpm, setRpm] = useState('');
  const [limit, setLimit] = useState('');
  const [projectName, setProjectName] = useState('');

  const act = async (work: () => Promise<void>) => {
    setError(null);
    try {
      await work();
      keys.refresh();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const create = (event: FormEvent) => {
    event.preventDefault();
    void act(async () => {
      const { body } = await api<{ secret: string }>('POST', '/gateway_keys', {
        body: {
          label, project_id: project || projects.data?.data[0]?.id,
          ...(rpm && { rate_limit_rpm: Number(rpm) }), ...(limit && { credit_limit: { amount: Number(limit), period: 'monthly' } }),
        },
        idempotencyKey: crypto.randomUUID(),
      });
      setSecret(body.secret);
      setLabel('');
    });
  };
  const createProject = (event: FormEvent) => {
    event.preventDefault();
    void act(async () => {
      await api('POST', '/projects', { body: { name: projectName }, idempotencyKey: crypto.randomUUID() });
      setProjectName('');
      projects.refresh();
    });
  };
  /** The one key action being filled in (a form below the table, never a browser prompt). */
  const [editing, setEditing] = useState<{ key: GatewayKey; action: KeyAction; value: string } | null>(null);
  const startEdit = (key: GatewayKey, action: KeyAction) => setEditing({
    key, action,
    value: action === 'limit' ? (key.credit_limit ? String(key.credit_limit.amount) : '') : action === 'rate' ? String(key.rate_limit_rpm ?? DEFAULT_RATE_LIMIT_RPM) : '3600',
  });
  const saveEdit = (event: FormEvent) => {
    event.preventDefault();
    if (!editing) return;
    const { key, action, value } = editing;
    void act(async () => {
      if (action === 'limit') {
        await api('PATCH', `/gateway_keys/${key.id}`, { body: { credit_limit: value.trim() ? { amount: Number(value), period: 'monthly' } : null }, ifMatch: `"${key.version}"` });
      } else if (action === 'rate') {
        await api('PATCH', `/gateway_keys/${key.id}`, { body: { rate_limit_rpm: Number(value) }, ifMatch: `"${key.version}"` });
      } else {
        const { body } = await api<{ secret: string }>('POST', `/gateway_keys/${key.id}/rotate`, { body: { overlap_seconds: Number(value) }, idempotencyKey: crypto.randomUUID() });
        setSecret(body.secret);
      }
      setEditing(null);
    });
  };
  const toggle = (key: GatewayKey) => void act(async () => {
    await api('PATCH', `/gateway_keys/${key.id}`, { body: { disabled: !key.disabled }, ifMatch: `"${key.version}"` });
  });

  // Projects by their names; the id on hover.
  const projectNames = new Map((projects.data?.data ?? []).map((p) => [p.id, p.name]));
  const columns: ColumnDef<GatewayKey, unknown>[] = [
    { header: 'Label', accessorKey: 'label' },
    { header: 'Key', cell: ({ row }) => <code>{String(row.original.key_prefix ?? row.original.id)}</code> },
    { header: 'Project', cell: ({ row }) => <span title={row.original.project_id}>{projectNames.get(row.original.project_id) ?? row.original.project_id}</span> },
    { header: 'Rate (rpm)', cell: ({ row }) => row.original.rate_limit_rpm ?? 'default' },
    { header: 'Monthly limit', cell: ({ row }) => (row.original.credit_limit ? `$${row.original.credit_limit.amount} ${row.original.credit_limit.period}` : 'none') },
    { header: 'State', cell: ({ row }) => (row.original.revoked_at ? 'revoked' : row.original.disabled ? 'disabled' : 'active') },
    { header: 'Created', cell: ({ row }) => when(row.original.created_at) },
    {
      header: 'Actions',
      cell: ({ row }) => (
        <span className="actions">
          <button type="button" onClick={() => startEdit(row.original, 'rotate')} aria-label={`Rotate ${row.original.label}`}>Rotate</button>
          <button type="button" onClick={() => startEdit(row.original, 'limit')} aria-label={`Limit ${row.original.label}`}>Limit</button>
          <button type="button" onClick={() => startEdit(row.original, 'rate')} aria-label={`Rate ${row.original.label}`}>Rate</button>
          <button type="button" onClick={() => toggle(row.original)} aria-label={`${row.original.disabled ? 'Enable' : 'Disable'} ${row.original.label}`}>{row.original.disabled ? 'Enable' : 'Disable'}</button>
        </span>
      ),
    },
  ];

  return (
    <>
      <h1>Keys</h1>
      {secret && <RevealedSecret secret={secret} onDone={() => setSecret(null)} />}
      {error && <p role="alert" className="error">{error}</p>}
      <form className="inline" onSubmit={create} aria-label="Create a key">
        <label htmlFor="key-label">Label</label>
        <input id="key-label" value={label} onChange={(e) => setLabel(e.target.value)} required maxLength={80} />
        <label htmlFor="key-project">Project</label>
        <select id="key-project" value={project} onChange={(e) => setProject(e.target.value)}>
          {(projects.data?.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
        </select>
        <label htmlFor="key-rpm">Rate tier (requests a minute)</label>
        <select id="key-rpm" value={rpm} onChange={(e) => setRpm(e.target.value)}>
          <option value="">default ({DEFAULT_RATE_LIMIT_RPM})</option>
          {RATE_LIMIT_TIERS.map((t) => <option key={t} value={t}>{t}</option>)}
        </select>
        <label htmlFor="key-limit">Monthly limit (USD)</label>
        <input id="key-limit" type="number" min={0.01} step={0.01} value={limit} onChange={(e) => setLimit(e.target.value)} />
        <button type="submit">Create key</button>
      </form>
      <h2>Projects</h2>
      <form className="inline" onSubmit={createProject} aria-label="Create a project">
        <label htmlFor="p-name">Project name</label>
        <input id="p-name" value={projectName} onChange={(e) => setProjectName(e.target.value)} required maxLength={80} />
        <button type="submit">Create project</button>
      </form>
      <ReadState read={projects} what="projects">
        {(page) => <ul className="projects">{page.data.map((p) => <li key={p.id}>{p.name} <code>{p.id}</code></li>)}</ul>}
      </ReadState>
      <h2>Keys</h2>
      <ReadState read={keys} what="keys">
        {(page) => (
          <>
            <DataTable caption="Gateway keys" columns={columns} rows={page.data} />
            <Pager page={page} what="keys" {...keyList} />
            {editing && <KeyActionForm editing={editing} onChange={(value) => setEditing({ ...editing, value })} onSubmit={saveEdit} onCancel={() => setEditing(null)} />}
          </>
        )}
      </ReadState>
    </>
  );
}
