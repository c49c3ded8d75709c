import { and, eq, inArray } from 'drizzle-orm';
import type { DatabaseHandle } from '../../core/db/client';
import { budgetCrossings, findings, modelPrices, notificationChannels, notificationRules, orgSettings, requestLogs, usageHourly, webhookDeliveries, type AlertEventType, type RequestAttempt } from '../../core/db/schema';
import { loadModelCatalog, type ModelCatalog } from '../../core/catalog/model-catalog';
import type { Detection } from '../../core/findings/detection';
import { detectorNamed, runDetector, type ScanSettings } from '../../core/findings/scan';
import { recordDetection, resolveFinding } from '../../core/findings/store';
import { detectThresholdCrossed } from '../../core/findings/detectors/threshold-crossed';
import { fingerprintOf } from '../../core/findings/detection';
import { newId } from '../../core/ids';
import type { RequestLogEntry } from '../../core/request-log/writer';
import { testDatabase } from '../helpers/harness';
import { createTenant, type Tenant } from '../helpers/tenants';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;
let catalog: Promise<ModelCatalog> | undefined;
const SETTINGS: ScanSettings = { anomalyDollarFloor: 5, everyMs: 5 * MINUTE_MS, catalog: () => (catalog ??= loadModelCatalog()) };

/**
 * Each detector's run over real Postgres (issue 22): rows seeded in the request log, the hourly
 * rollup and the budget crossings of an organization of its own, the detector run at a chosen
 * time, and the findings it recorded read back. The detectors' decisions are unit-tested on
 * synthetic series (test/unit/findings-detectors.test.ts); this checks what they are given.
 */
describe('finding detectors over the database', () => {
  let database: DatabaseHandle;
  let tenant: Tenant;
  const now = new Date(Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 30 * MINUTE_MS);

  beforeAll(async () => {
    database = testDatabase();
    tenant = await createTenant(database.db);
  });
  afterAll(() => database.close());

  const db = () => database.db;
  let seq = 0;
  const attempt = (connection: string, outcome: string, model = 'gpt-4o-mini'): RequestAttempt =>
    ({ connection_id: connection, provider: 'openai', model, position: 'primary', outcome, status: outcome === 'ok' ? 200 : 500, latency_ms: 10 });
  async function logged(rows: Array<Partial<RequestLogEntry> & { agoMs: number }>): Promise<void> {
    const values = rows.map(({ agoMs, ...r }) => {
      const createdAt = new Date(now.getTime() - agoMs);
      return Object.assign({
        id: newId('req', createdAt.getTime()), orgId: tenant.orgId, keyId: tenant.key.id, projectId: tenant.projectId, endpoint: 'chat.completions',
        requestedModel: 'gpt-4o-mini', servedModel: 'gpt-4o-mini', provider: 'openai', status: 200, latencyMs: 100 + (seq++ % 7), createdAt,
      }, r) satisfies RequestLogEntry;
    });
    for (let i = 0; i < values.length; i += 500) await db().insert(requestLogs).values(values.slice(i, i + 500));
  }
  const found = (type: AlertEventType) => db().select().from(findings).where(and(eq(findings.orgId, tenant.orgId), eq(findings.type, type)));
  const run = (name: string, at = now) => runDetector(db(), detectorNamed(name), at, SETTINGS, null);

  it('connection.failing: half of a connection\'s attempts failing is a warning, three credential refusals critical; clear for a window resolves it', async () => {
    const failing = newId('conn');
    const refused = newId('conn');
    await logged([
      ...Array.from({ length: 8 }, (_, i) => ({ agoMs: 1000 + i * 20_000, status: 502, attempts: [attempt(failing, i % 2 ? 'server_error' : 'timeout')] })),
      ...Array.from({ length: 5 }, (_, i) => ({ agoMs: 1000 + i * 30_000, attempts: [attempt(failing, 'ok')] })),
      ...Array.from({ length: 3 }, (_, i) => ({ agoMs: 1000 + i * 30_000, status: 502, attempts: [attempt(refused, 'credential')] })),
      // Outside the five-minute window: not counted.
      ...Array.from({ length: 20 }, () => ({ agoMs: 10 * MINUTE_MS, attempts: [attempt(refused, 'ok')] })),
    ]);
    await run('connection-failing');
    const rows = await found('connection.failing');
    const of = (id: string) => rows.find((r) => r.scopeId === id);
    expect(of(failing)).toMatchObject({ severity: 'warning', status: 'open', scopeKind: 'connection' });
    expect(of(failing)!.evidence).toMatchObject({ attempts: 13, failures: { server_error: 4, timeout: 4, credential: 0 } });
    expect(of(refused)).toMatchObject({ severity: 'critical' });

    // Ten minutes on, nothing failed in the window: both resolve.
    await run('connection-failing', new Date(now.getTime() + 10 * MINUTE_MS));
    expect((await found('connection.failing')).map((r) => r.status)).toEqual(['resolved', 'resolved']);
  });

  it('unpriced.traffic: the last 60 minutes up to now of answered requests with no price, per model, the current hour included (issue 33)', async () => {
    // An organization of its own: the other tests' rows have no cost either.
    const own = await createTenant(db());
    const at = (agoMs: number, r: Partial<RequestLogEntry>) => {
      const createdAt = new Date(now.getTime() - agoMs);
      return Object.assign({ id: newId('req', createdAt.getTime()), orgId: own.orgId, keyId: own.key.id, projectId: own.projectId, endpoint: 'chat.completions', requestedModel: 'mystery-model', provider: 'custom', status: 200, latencyMs: 50, createdAt }, r) satisfies RequestLogEntry;
    };
    await db().insert(requestLogs).values([
      // `now` is half past: four in this clock hour, three in the one before, all within 60 minutes.
      ...[1, 5, 10, 20].map((m) => at(m * MINUTE_MS, {})),
      ...[35, 45, 55].map((m) => at(m * MINUTE_MS, {})),
      // Older than 60 minutes, a failure (nothing billed) and a priced request: not counted.
      at(65 * MINUTE_MS, {}),
      at(2 * MINUTE_MS, { status: 502 }),
      at(2 * MINUTE_MS, { requestedModel: 'gpt-4o-mini', provider: 'openai', cost: 0.001 }),
    ]);
    await runDetector(db(), detectorNamed('unpriced-traffic'), now, SETTINGS, null);
    const rows = await db().select().from(findings).where(and(eq(findings.orgId, own.orgId), eq(findings.type, 'unpriced.traffic')));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ scopeKind: 'model', scopeId: 'mystery-model', observed: 7 });
    expect(rows[0]!.summary).not.toContain('$0');
  });

  it('unpriced.traffic is raised by the first scan after traffic in a fresh clock hour, not an hour later (issue 33)', async () => {
    const own = await createTenant(db());
    const freshHour = new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS + 2 * MINUTE_MS);
    const createdAt = new Date(freshHour.getTime() - MINUTE_MS);
    await db().insert(requestLogs).values({ id: newId('req', createdAt.getTime()), orgId: own.orgId, keyId: own.key.id, projectId: own.projectId, endpoint: 'chat.completions', requestedModel: 'new-model', provider: 'custom', status: 200, latencyMs: 50, createdAt });
    await runDetector(db(), detectorNamed('unpriced-traffic'), freshHour, SETTINGS, null);
    const rows = await db().select().from(findings).where(and(eq(findings.orgId, own.orgId), eq(findings.type, 'unpriced.traffic')));
    expect(rows.map((r) => [r.scopeId, r.observed])).toEqual([['new-model', 1]]);
  });

  it('traffic.regression and traffic.model_changed from the request log against the trailing week', async () => {
    const conn = newId('conn');
    // A week of a route served by model-a at about 100 ms, then an hour of model-b at 1.2 s.
    await logged([
      ...Array.from({ length: 120 }, (_, i) => ({ agoMs: 2 * HOUR_MS + i * HOUR_MS, routeSlug: 'support', requestedModel: 'support', servedModel: 'model-a', connectionId: conn, latencyMs: 100 })),
      ...Array.from({ length: 60 }, (_, i) => ({ agoMs: 1000 + i * 30_000, routeSlug: 'support', requestedModel: 'support', servedModel: 'model-a', connectionId: conn, latencyMs: 1200 })),
      ...Array.from({ length: 5 }, (_, i) => ({ agoMs: 1000 + i * 60_000, routeSlug: 'support', requestedModel: 'support', servedModel: 'model-b', connectionId: conn, latencyMs: 300 })),
    ]);
    await run('traffic-regression');
    const [regression] = await found('traffic.regression');
    expect(regression).toMatchObject({ scopeKind: 'connection', scopeId: conn, subject: { model: 'model-a' }, expected: 100 });
    expect(regression!.observed).toBeGreaterThanOrEqual(1200);

    // The provider answering with another model than asked (a dated snapshot of it is the same model).
    const other = newId('conn');
    await logged([
      ...Array.from({ length: 3 }, (_, i) => ({ agoMs: 1000 + i * 1000, connectionId: other, servedModel: 'model-z', attempts: [attempt(other, 'ok', 'model-y')] })),
      { agoMs: 5000, connectionId: other, servedModel: 'model-y-2025-01-01', attempts: [attempt(other, 'ok', 'model-y')] },
    ]);
    // Tool-gateway calls share the log (server slug as route, tool as model) and are no model traffic.
    const mcp = { endpoint: 'mcp.tools/call', routeSlug: 'docs', requestedModel: 'docs', connectionId: newId('mcps') };
    await logged([
      ...Array.from({ length: 60 }, (_, i) => Object.assign({ agoMs: 2 * HOUR_MS + i * HOUR_MS, servedModel: 'search', latencyMs: 50 }, mcp)),
      ...Array.from({ length: 60 }, (_, i) => Object.assign({ agoMs: 1000 + i * 10_000, servedModel: 'fetch', latencyMs: 5000 }, mcp)),
    ]);
    await run('model-changed');
    await run('traffic-regression');
    expect(await found('traffic.regression')).toHaveLength(1);
    const changed = await found('traffic.model_changed');
    expect(changed.map((c) => [c.scopeKind, c.subject]).sort()).toEqual([['connection', { model: 'model-y' }], ['organization', { route: 'support', model: 'model-b' }]]);
    expect(changed.find((c) => c.scopeKind === 'connection')!.evidence).toMatchObject({ asked: 'model-y', answered: 'model-z', requests: 3 });
  });

  it('budget.threshold_crossed: each crossing once (even one recorded while runs were down), resolving after', async () => {
    await db().insert(budgetCrossings).values([
      { id: newId('bcross'), orgId: tenant.orgId, scope: `project:${tenant.projectId}`, window: '2026-11-01', fraction: 0.8, limit: 100, spent: 80.5, behavior: 'alert', crossedAt: new Date(now.getTime() - MINUTE_MS) },
      // Recorded a day ago, while no run happened: still a finding.
      { id: newId('bcross'), orgId: tenant.orgId, scope: `organization:${tenant.orgId}`, window: '2026-10-01', fraction: 0.5, limit: 100, spent: 51, behavior: 'alert', crossedAt: new Date(now.getTime() - DAY_MS) },
    ]);
    const first = await run('budget-crossings');
    expect(first.opened).toBeGreaterThanOrEqual(2);
    await run('budget-crossings', new Date(now.getTime() + MINUTE_MS));
    const crossings = await found('budget.threshold_crossed');
    expect(crossings.map((c) => [c.scopeKind, c.severity, c.occurrences, c.status]).sort()).toEqual([
      ['organization', 'info', 1, 'open'], ['project', 'warning', 1, 'open'],
    ]);
    // Not seen again for two periods: resolved, and never opened again.
    await run('budget-crossings', new Date(now.getTime() + 20 * MINUTE_MS));
    await run('budget-crossings', new Date(now.getTime() + 25 * MINUTE_MS));
    expect((await found('budget.threshold_crossed')).map((c) => c.status)).toEqual(['resolved', 'resolved']);
  });

  it('cost.drift: the provider\'s reported cost against our own estimate of the same requests, over a day', async () => {
    // Our rate: $1 a million input and $2 a million output, so 1,000 + 500 tokens are $0.002.
    await db().insert(modelPrices).values({ id: newId('price'), orgId: tenant.orgId, model: 'drift-model', provider: 'openai', inputPerMillion: 1, outputPerMillion: 2 });
    const yesterday = now.getTime() - (now.getTime() % DAY_MS) - DAY_MS;
    const usage = { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500, provider_cost: 0.003 };
    const day = (count: number, model: string) => Array.from({ length: count }, (_, i) => ({
      agoMs: now.getTime() - (yesterday + 60_000 + i * 60_000), servedModel: model, requestedModel: model, usage, cost: 0.003, priceSource: 'provider',
    }));
    // 60 requests the provider billed $0.003 each: $0.18 against our $0.12. 49 of another: too few to judge.
    await logged([...day(60, 'drift-model'), ...day(49, 'drift-model-few')]);
    await db().insert(modelPrices).values({ id: newId('price'), orgId: tenant.orgId, model: 'drift-model-few', provider: 'openai', inputPerMillion: 1, outputPerMillion: 2 });
    await run('cost-drift');
    const [drift, ...more] = await found('cost.drift');
    expect(more).toHaveLength(0);
    expect(drift).toMatchObject({ scopeKind: 'model', scopeId: 'drift-model', severity: 'critical', observed: 0.18 });
    expect(drift!.expected).toBeCloseTo(0.12, 9);
    expect(drift!.evidence).toMatchObject({ requests: 60 });
  });

  it('spend.anomaly: the organization\'s dollar floor decides whether a spike is news', async () => {
    const org = await createTenant(db());
    const target = new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - HOUR_MS);
    const hours = Array.from({ length: 14 * 24 }, (_, i) => ({
      orgId: org.orgId, hour: new Date(target.getTime() - (i + 1) * HOUR_MS), keyId: org.key.id, projectId: org.projectId, model: 'm', requests: 30, cost: 1 + (i % 3) / 10,
    }));
    await db().insert(usageHourly).values([...hours, { orgId: org.orgId, hour: target, keyId: org.key.id, projectId: org.projectId, model: 'm', requests: 300, cost: 40 }]);
    const anomalies = () => db().select().from(findings).where(and(eq(findings.orgId, org.orgId), eq(findings.type, 'spend.anomaly')));

    const floor = (dollars: number) => db().insert(orgSettings).values({ id: org.orgId, orgId: org.orgId, anomalyDollarFloor: dollars })
      .onConflictDoUpdate({ target: orgSettings.id, set: { anomalyDollarFloor: dollars } });
    await floor(100);
    await run('spend-anomaly');
    expect(await anomalies()).toHaveLength(0);
    await floor(5);
    await run('spend-anomaly');
    expect(await anomalies()).toMatchObject([{ scopeKind: 'key', scopeId: org.key.id, observed: 40, status: 'open' }]);
  });

  it('spend.anomaly also finds an end customer\'s own spike, naming them (issue 33)', async () => {
    const org = await createTenant(db());
    const target = new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS - HOUR_MS);
    // Two customers with a steady two weeks; one of them spends $40 in the target hour.
    const steady = (userId: string) => Array.from({ length: 14 * 24 }, (_, i) => ({
      orgId: org.orgId, hour: new Date(target.getTime() - (i + 1) * HOUR_MS), keyId: org.key.id, projectId: org.projectId, model: 'm', userId, requests: 30, cost: 1 + (i % 3) / 10,
    }));
    await db().insert(usageHourly).values([...steady('calm'), ...steady('spiky'),
      { orgId: org.orgId, hour: target, keyId: org.key.id, projectId: org.projectId, model: 'm', userId: 'calm', requests: 30, cost: 1.1 },
      { orgId: org.orgId, hour: target, keyId: org.key.id, projectId: org.projectId, model: 'm', userId: 'spiky', requests: 300, cost: 40 }]);
    await run('spend-anomaly');
    const found = await db().select().from(findings).where(and(eq(findings.orgId, org.orgId), eq(findings.type, 'spend.anomaly'), eq(findings.scopeKind, 'end_user')));
    expect(found.map((f) => [f.scopeId, f.observed])).toEqual([['spiky', 40]]);
    expect(found[0]!.title).toContain('end customer spiky');
  });

  it('cost.drift: a served model\'s effective price changing since it was last seen is an info finding', async () => {
    const org = await createTenant(db());
    const price = newId('price');
    await db().insert(modelPrices).values({ id: price, orgId: org.orgId, model: 'rated-model', provider: 'openai', inputPerMillion: 1, outputPerMillion: 2 });
    await db().insert(requestLogs).values({
      id: newId('req'), orgId: org.orgId, keyId: org.key.id, projectId: org.projectId, endpoint: 'chat.completions', requestedModel: 'rated-model',
      servedModel: 'rated-model', provider: 'openai', status: 200, latencyMs: 50, createdAt: new Date(now.getTime() - HOUR_MS),
    });
    const priceFindings = () => db().select().from(findings).where(and(eq(findings.orgId, org.orgId), eq(findings.type, 'cost.drift')));
    await run('cost-drift');
    expect(await priceFindings()).toHaveLength(0);
    await db().update(modelPrices).set({ outputPerMillion: 3 }).where(eq(modelPrices.id, price));
    await run('cost-drift', new Date(now.getTime() + MINUTE_MS));
    const [changed, ...more] = await priceFindings();
    expect(more).toHaveLength(0);
    expect(changed).toMatchObject({ severity: 'info', scopeKind: 'model', scopeId: 'rated-model#price' });
    expect(changed!.evidence).toMatchObject({ kind: 'price_changed', previous: { input: 1, output: 2 }, current: { input: 1, output: 3 } });
    // Seen again at the same price: nothing new.
    await run('cost-drift', new Date(now.getTime() + 2 * MINUTE_MS));
    expect(await priceFindings()).toMatchObject([{ occurrences: 1 }]);
  });

  it('notifies a muted rule\'s channel again once muted_until has passed', async () => {
    const org = await createTenant(db());
    const channel = newId('nch');
    await db().insert(notificationChannels).values({ id: channel, orgId: org.orgId, kind: 'email', label: 'mail', emails: ['m@example.com'] });
    const rule = newId('nrule');
    await db().insert(notificationRules).values({ id: rule, orgId: org.orgId, eventType: 'unpriced.traffic', channelId: channel, muteDays: 1, mutedUntil: new Date(now.getTime() + HOUR_MS) });
    const detection = (model: string): Detection => ({
      orgId: org.orgId, type: 'unpriced.traffic', severity: 'warning', title: 'Unpriced', summary: 'Unpriced traffic.', scope: { kind: 'model', id: model }, subject: {},
      window: { from: now, to: now }, observed: 3, expected: null, threshold: null, evidence: {},
    });
    const notify = { publicUrl: 'https://gw.test' };
    expect((await recordDetection(db(), detection('muted-a'), now, notify)).deliveries).toHaveLength(0);
    // Two hours on, the mute has run out.
    const later = new Date(now.getTime() + 2 * HOUR_MS);
    const after = await recordDetection(db(), detection('muted-b'), later, notify);
    expect(after.deliveries).toHaveLength(1);
    const [row] = await db().select().from(webhookDeliveries).where(eq(webhookDeliveries.id, after.deliveries[0]!.id));
    expect(row).toMatchObject({ receiver: channel, url: 'mailto:m@example.com', eventType: 'unpriced.traffic', endpointId: null });
    expect(JSON.parse(row!.payload)).toMatchObject({ to: ['m@example.com'], subject: '[warning] Unpriced traffic' });
  });

  it('notifies on a finding about an end customer only through rules with include_end_user, naming them (issue 33)', async () => {
    const org = await createTenant(db());
    const channel = async (email: string) => {
      const id = newId('nch');
      await db().insert(notificationChannels).values({ id, orgId: org.orgId, kind: 'email', label: email, emails: [email] });
      return id;
    };
    const [withCustomers, without] = [await channel('with@example.com'), await channel('without@example.com')];
    await db().insert(notificationRules).values([
      { id: newId('nrule'), orgId: org.orgId, eventType: 'budget.threshold_crossed', channelId: withCustomers, includeEndUser: true },
      { id: newId('nrule'), orgId: org.orgId, eventType: 'budget.threshold_crossed', channelId: without, includeEndUser: false },
    ]);
    const crossing = (kind: 'end_user' | 'project', id: string) => detectThresholdCrossed({
      orgId: org.orgId, scope: { kind, id } as never, budget: `${kind}_budget`, window: '2026-11-01', fraction: 1, limit: 10, spent: 10, crossedAt: now,
    });
    const notify = { publicUrl: 'https://gw.test' };
    const receivers = async (deliveries: Array<{ id: string }>) => (await db().select().from(webhookDeliveries).where(inArray(webhookDeliveries.id, deliveries.map((d) => d.id)))).map((d) => d.receiver).sort();
    const customer = await recordDetection(db(), crossing('end_user', 'eucap_rule1:cust-42'), now, notify);
    expect(await receivers(customer.deliveries)).toEqual([withCustomers]);
    expect(customer.finding.title).toContain('End customer cust-42');
    expect(customer.finding.evidence).toMatchObject({ end_user_id: 'cust-42' });
    const project = await recordDetection(db(), crossing('project', org.projectId), now, notify);
    expect(await receivers(project.deliveries)).toEqual([withCustomers, without].sort());
  });

  it('a finding that flaps (resolved, reopened) notifies at most once an hour (issue 33)', async () => {
    const org = await createTenant(db());
    const channel = newId('nch');
    await db().insert(notificationChannels).values({ id: channel, orgId: org.orgId, kind: 'email', label: 'ops', emails: ['ops@example.com'] });
    await db().insert(notificationRules).values({ id: newId('nrule'), orgId: org.orgId, eventType: 'connection.failing', channelId: channel });
    const failing: Detection = {
      orgId: org.orgId, type: 'connection.failing', severity: 'warning', title: 'Failing', summary: 'Failing.', scope: { kind: 'connection', id: 'conn_flap' }, subject: {},
      window: { from: now, to: now }, observed: 1, expected: null, threshold: null, evidence: {},
    };
    const notify = { publicUrl: 'https://gw.test' };
    const at = (minutes: number) => new Date(now.getTime() + minutes * MINUTE_MS);
    const counts: number[] = [];
    for (const minute of [0, 10, 20, 30, 75]) {
      const change = await recordDetection(db(), failing, at(minute), notify);
      expect(change.change).toBe('opened');
      counts.push(change.deliveries.length);
      await resolveFinding(db(), org.orgId, fingerprintOf(failing), at(minute + 5));
    }
    expect(counts).toEqual([1, 0, 0, 0, 1]);
  });

  it('keeps a price change for a retried run: the price seen is written only after the run\'s findings (issue 33)', async () => {
    const org = await createTenant(db());
    const price = newId('price');
    await db().insert(modelPrices).values({ id: price, orgId: org.orgId, model: 'retried-model', provider: 'openai', inputPerMillion: 1, outputPerMillion: 2 });
    await db().insert(requestLogs).values({
      id: newId('req'), orgId: org.orgId, keyId: org.key.id, projectId: org.projectId, endpoint: 'chat.completions', requestedModel: 'retried-model',
      servedModel: 'retried-model', provider: 'openai', status: 200, latencyMs: 50, createdAt: new Date(now.getTime() - HOUR_MS),
    });
    await run('cost-drift');
    await db().update(modelPrices).set({ outputPerMillion: 5 }).where(eq(modelPrices.id, price));
    // A run that detects the change and dies before recording it...
    await detectorNamed('cost-drift').detect(db(), new Date(now.getTime() + MINUTE_MS), SETTINGS);
    // ...is retried, and the retry still sees the change.
    await run('cost-drift', new Date(now.getTime() + 2 * MINUTE_MS));
    const changed = await db().select().from(findings).where(and(eq(findings.orgId, org.orgId), eq(findings.type, 'cost.drift')));
    expect(changed.map((c) => c.scopeId)).toEqual(['retried-model#price']);
  });
});
