import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import type { DatabaseHandle } from '../../core/db/client';
import { auditEvents } from '../../core/db/schema';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import type { TestApi } from '../helpers/harness';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { expectShape } from '../helpers/resource-shapes';
import { createTenant, type Tenant } from '../helpers/tenants';

type Resource = { id: string; object: string; version: number; [field: string]: unknown };

/** The tenant, with a connection and a notification channel for the types that refer to one. */
type Fixture = Tenant & { connectionId: string; channelId: string; costCenterId: string };

/** What each collection resource is created, changed and refused with. */
type Case = {
  type: string;
  scope: string;
  create: (t: Fixture) => Record<string, unknown>;
  patch: Record<string, unknown> | null;
  /** A create body breaking one field bound, and the field the 400 must name. */
  outOfBounds: [(t: Fixture) => Record<string, unknown>, string];
  reveal?: string[];
  /** What a DELETE leaves readable: `gone` (404 afterwards) or `kept` (archived, still readable). */
  afterDelete: 'gone' | 'kept';
};

let counter = 0;
const unique = (p: string) => `${p}-${Date.now().toString(36)}-${counter++}`;

const CASES: Case[] = [
  {
    type: 'projects', scope: 'projects', afterDelete: 'kept',
    create: () => ({ name: unique('project') }),
    patch: { name: 'renamed' },
    outOfBounds: [() => ({ name: 'x'.repeat(81) }), 'name'],
  },
  {
    type: 'gateway_keys', scope: 'keys', afterDelete: 'gone', reveal: ['secret'],
    create: (t) => ({ label: unique('key'), project_id: t.projectId }),
    patch: { label: 'renamed', credit_limit: { amount: 5, period: 'monthly' } },
    outOfBounds: [(t) => ({ label: 'k', project_id: t.projectId, credit_limit: { amount: 0.001, period: 'daily' } }), 'credit_limit'],
  },
  {
    type: 'provider_connections', scope: 'connections', afterDelete: 'gone',
    create: () => ({ kind: 'openai', name: unique('conn'), secret: 'sk-live-not-a-real-one' }),
    patch: { name: unique('renamed'), timeout_ms: 30_000 },
    outOfBounds: [() => ({ kind: 'openai', name: unique('conn'), secret: 's', timeout_ms: 999 }), 'timeout_ms'],
  },
  {
    type: 'routes', scope: 'routes', afterDelete: 'gone',
    create: (t) => ({ slug: unique('route'), targets: [{ connection_id: t.connectionId, model: 'gpt-4o-mini' }] }),
    patch: { max_retries: 3, description: 'cheap first' },
    outOfBounds: [(t) => ({ slug: unique('route'), max_retries: 4, targets: [{ connection_id: t.connectionId, model: 'm' }] }), 'max_retries'],
  },
  {
    type: 'model_prices', scope: 'prices', afterDelete: 'gone',
    create: () => ({ model: unique('model'), input_per_million: 0.15, output_per_million: 0.6 }),
    patch: { note: 'negotiated rate', input_per_million: 0.1 },
    outOfBounds: [() => ({ model: unique('model'), note: 'x'.repeat(201) }), 'note'],
  },
  {
    type: 'webhook_endpoints', scope: 'webhooks', afterDelete: 'gone', reveal: ['secret'],
    create: () => ({ url: 'https://hooks.example.com/gw', events: ['job.succeeded'] }),
    patch: null,
    outOfBounds: [() => ({ url: 'https://hooks.example.com/gw', description: 'x'.repeat(201) }), 'description'],
  },
  {
    type: 'notification_channels', scope: 'alerts', afterDelete: 'gone',
    create: () => ({ kind: 'email', label: unique('oncall'), emails: ['oncall@example.com'] }),
    patch: { label: 'renamed', status: 'disabled' },
    outOfBounds: [() => ({ kind: 'email', label: 'oncall', emails: Array.from({ length: 21 }, (_, i) => `p${i}@example.com`) }), 'emails'],
  },
  {
    type: 'notification_rules', scope: 'alerts', afterDelete: 'gone',
    create: (t) => ({ event_type: 'spend.anomaly', channel_id: t.channelId, min_severity: 'warning' }),
    patch: { min_severity: 'critical', include_end_user: true },
    outOfBounds: [(t) => ({ event_type: 'spend.anomaly', channel_id: t.channelId, mute_days: 3 }), 'mute_days'],
  },
  {
    type: 'cost_centers', scope: 'costs', afterDelete: 'kept',
    create: () => ({ name: unique('platform'), code: unique('CC').slice(0, 40), owner_email: 'finance@example.com' }),
    patch: { name: 'Platform team', owner_email: null },
    outOfBounds: [() => ({ name: 'x', code: 'has space' }), 'code'],
  },
  {
    type: 'cost_center_rules', scope: 'costs', afterDelete: 'gone',
    create: (t) => ({ match: { model: 'gpt-4o*' }, priority: 10, cost_center_id: t.costCenterId }),
    patch: { priority: 5, note: 'cheaper models first' },
    outOfBounds: [(t) => ({ match: {}, priority: -1, cost_center_id: t.costCenterId }), 'priority'],
  },
  {
    type: 'commitments', scope: 'costs', afterDelete: 'gone',
    create: () => ({ provider_kind: 'openai', label: unique('annual'), amount_usd: 1000, period_start: '2026-01-01T00:00:00Z', period_end: '2027-01-01T00:00:00Z', discount_pct: 15 }),
    patch: { label: 'renamed', amount_usd: 1200, models: ['gpt-4o-mini'] },
    outOfBounds: [() => ({ provider_kind: 'openai', label: 'x', amount_usd: 10, period_start: 1, period_end: 2, discount_pct: 101 }), 'discount_pct'],
  },
  {
    type: 'decision_policies', scope: 'decisions', afterDelete: 'gone',
    create: () => ({
      slug: unique('triage'), model: 'openai/gpt-4o-mini', instructions: 'Route the ticket.', deadline_ms: 2000,
      output_schema: { type: 'object', properties: { queue: { type: 'string' } }, required: ['queue'] }, fallback: { queue: 'general' },
    }),
    patch: { enabled: false, deadline_ms: 500, max_tokens: 50 },
    outOfBounds: [() => ({ slug: unique('slow'), model: 'openai/gpt-4o-mini', output_schema: { type: 'object' }, deadline_ms: 50 }), 'deadline_ms'],
  },
];

/**
 * Every collection resource through the same checks (issue 3, "Done when"): create, read,
 * list, patch with and without a good If-Match, delete, field bounds, cross-organization 404,
 * scope refusal, an audit row per write, and answers exactly of their declared shape.
 */
describe.each(CASES)('management resource $type', (c) => {
  let fixture: ManagementFixture;
  let api: TestApi;
  let database: DatabaseHandle;
  let tenant: Fixture;
  let client: ReturnType<typeof manageClient>;

  beforeAll(async () => {
    fixture = await startManagementFixture();
    ({ api, database, client } = fixture);
    const conn = await client.post<Resource>('/provider_connections', { kind: 'openai', name: unique('route target'), secret: 'sk-x' });
    const channel = await client.post<Resource>('/notification_channels', { kind: 'email', label: unique('channel'), emails: ['ops@example.com'] });
    const center = await client.post<Resource>('/cost_centers', { name: 'fixture', code: unique('fx').slice(0, 40) });
    tenant = { ...fixture.tenant, connectionId: conn.body.id, channelId: channel.body.id, costCenterId: center.body.id };
  });
  afterAll(() => fixture.close());

  const auditOf = (id: string) =>
    database.db.select().from(auditEvents).where(and(eq(auditEvents.orgId, tenant.orgId), eq(auditEvents.resourceId, id))).orderBy(auditEvents.createdAt, auditEvents.id);
  const reveal = () => Object.fromEntries((c.reveal ?? []).map((f) => [f, expect.anything()]));
  const revealShape = () => Object.fromEntries((c.reveal ?? []).map((f) => [f, z.string()]));

  async function create(): Promise<Resource> {
    const res = await client.post<Resource>(`/${c.type}`, c.create(tenant));
    expect(res.status).toBe(201);
    return res.body;
  }

  it('creates (201, version 1, ETag, declared shape, audit row), then reads and lists it', async () => {
    const res = await client.post<Resource>(`/${c.type}`, c.create(tenant));
    expect(res.status).toBe(201);
    expect(res.etag).toBe('"1"');
    expect(res.body).toMatchObject({ version: 1, managed_by: 'api', ...reveal() });
    expectShape(c.type, res.body, revealShape());

    const read = await client.get<Resource>(`/${c.type}/${res.body.id}`);
    expect([read.status, read.etag]).toEqual([200, '"1"']);
    expectShape(c.type, read.body);
    for (const field of c.reveal ?? []) expect(read.body[field]).toBeUndefined();

    const list = await client.get<{ object: string; data: Resource[] }>(`/${c.type}`);
    expect(list.body.object).toBe('list');
    const listed = list.body.data.find((r) => r.id === res.body.id);
    expect(listed).toEqual(read.body);

    const audit = await auditOf(res.body.id);
    expect(audit.map((a) => [a.action, a.beforeVersion, a.afterVersion, a.actorTokenId !== null])).toEqual([[`${c.type}.create`, null, 1, true]]);
    for (const field of c.reveal ?? []) expect(JSON.stringify(audit)).not.toContain(res.body[field] as string);
  });

  it('patches only with a good If-Match; a stale one changes nothing', async () => {
    const r = await create();
    if (!c.patch) {
      const refused = await client.patch(`/${c.type}/${r.id}`, {}, '"1"');
      expect([refused.status, refused.body.error?.code]).toEqual([400, 'operation_not_supported']);
      return;
    }
    const missing = await client.patch(`/${c.type}/${r.id}`, c.patch);
    expect([missing.status, missing.body.error?.code]).toEqual([400, 'if_match_required']);
    const stale = await client.patch(`/${c.type}/${r.id}`, c.patch, '"7"');
    expect([stale.status, stale.body.error?.code, stale.etag]).toEqual([409, 'version_conflict', '"1"']);
    expect((await client.get(`/${c.type}/${r.id}`)).body).toMatchObject({ version: 1 });

    const good = await client.patch<Resource>(`/${c.type}/${r.id}`, c.patch, '"1"');
    expect([good.status, good.etag]).toEqual([200, '"2"']);
    expect(good.body).toMatchObject({ ...c.patch, version: 2 });
    expectShape(c.type, good.body);
    const audit = await auditOf(r.id);
    expect(audit.at(-1)).toMatchObject({ action: `${c.type}.update`, beforeVersion: 1, afterVersion: 2 });
  });

  it('refuses unknown fields and out-of-bounds values with a 400 naming the field', async () => {
    const [body, field] = c.outOfBounds;
    const res = await client.post(`/${c.type}`, body(tenant));
    expect([res.status, res.body.error?.type]).toEqual([400, 'invalid_request_error']);
    expect(res.body.error?.message).toContain(field);
    const unknownField = await client.post(`/${c.type}`, { ...c.create(tenant), surprise: true });
    expect(unknownField.status).toBe(400);
    expect(unknownField.body.error?.message).toContain('surprise');
  });

  it('deletes with If-Match and audits it', async () => {
    const r = await create();
    const missing = await client.delete(`/${c.type}/${r.id}`);
    expect([missing.status, missing.body.error?.code]).toEqual([400, 'if_match_required']);
    const del = await client.delete(`/${c.type}/${r.id}`, '"1"');
    expect(del.status).toBe(200);
    const after = await client.get(`/${c.type}/${r.id}`);
    expect(after.status).toBe(c.afterDelete === 'gone' ? 404 : 200);
    const listed = (await client.get<{ data: Resource[] }>(`/${c.type}`)).body.data.some((x) => x.id === r.id);
    expect(listed).toBe(c.afterDelete === 'kept');
    expect((await auditOf(r.id)).at(-1)).toMatchObject({ action: `${c.type}.delete`, beforeVersion: 1 });
  });

  it('answers 404 resource_not_found to another organization, for every operation', async () => {
    const r = await create();
    const other = await createTenant(database.db);
    const stranger = manageClient(api.url, other.token);
    const attempts = [stranger.get(`/${c.type}/${r.id}`), stranger.delete(`/${c.type}/${r.id}`, '"1"')];
    if (c.patch) attempts.push(stranger.patch(`/${c.type}/${r.id}`, c.patch, '"1"'));
    for (const res of await Promise.all(attempts)) expect([res.status, res.body.error?.code]).toEqual([404, 'resource_not_found']);
    expect((await stranger.get<{ data: Resource[] }>(`/${c.type}`)).body.data.some((x) => x.id === r.id)).toBe(false);
    expect((await client.get(`/${c.type}/${r.id}`)).body).toMatchObject({ version: 1 });
  });

  it(`refuses a token without ${c.scope} scopes (403 insufficient_scope) and read-only tokens on writes`, async () => {
    const r = await create();
    const none = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'other', scopes: ['organization:read'], createdByMemberId: tenant.memberId });
    const reader = await issueManagementToken(database.db, { orgId: tenant.orgId, name: 'reader', scopes: [`${c.scope}:read`], createdByMemberId: tenant.memberId });
    const outsider = manageClient(api.url, none.token);
    for (const res of [await outsider.get(`/${c.type}`), await outsider.get(`/${c.type}/${r.id}`), await outsider.post(`/${c.type}`, c.create(tenant))]) {
      expect([res.status, res.body.error?.code]).toEqual([403, 'insufficient_scope']);
    }
    const readOnly = manageClient(api.url, reader.token);
    expect((await readOnly.get(`/${c.type}/${r.id}`)).status).toBe(200);
    const write = await readOnly.post(`/${c.type}`, c.create(tenant));
    expect([write.status, write.body.error?.code]).toEqual([403, 'insufficient_scope']);
    expect((await readOnly.delete(`/${c.type}/${r.id}`, '"1"')).status).toBe(403);
  });
});
