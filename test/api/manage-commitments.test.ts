import { and, eq } from 'drizzle-orm';
import { findings, spendLedger } from '../../core/db/schema';
import { detectorNamed, runDetector } from '../../core/findings/scan';
import { newId } from '../../core/ids';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';

type Commitment = Record<string, number | string | null | string[]>;
const DAY_MS = 86_400_000;

/**
 * Issue 23, commitments: the figures a read adds are sums over the settled ledger on the
 * commitment's provider kind and models, after its discount.
 */
describe('commitments', () => {
  let f: ManagementFixture;
  beforeAll(async () => {
    f = await startManagementFixture();
  });
  afterAll(() => f.close());

  /**
   * A settled request of `amount` dollars `daysAgo` days ago, served by `provider`/`model`: its
   * ledger row only, as after the request log's partition was dropped or its batch was lost.
   */
  async function spent(daysAgo: number, amount: number, provider: string, model: string, extra: { jobId?: string } = {}): Promise<void> {
    const at = new Date(Date.now() - daysAgo * DAY_MS);
    const t = f.tenant;
    await f.database.db.insert(spendLedger).values({
      id: newId('spend'), orgId: t.orgId, lineageId: t.key.id, projectId: t.projectId, requestId: extra.jobId ? null : newId('req', at.getTime()), jobId: extra.jobId ?? null,
      provider, model, amount, state: 'settled', createdAt: at, updatedAt: at,
    });
  }

  it('adds consumed, remaining, burn rate and projections from the ledger, after the discount', async () => {
    await spent(1, 10, 'openai', 'gpt-4o-mini');
    await spent(2, 5, 'openai', 'gpt-4o-mini');
    await spent(8, 20, 'openai', 'gpt-4o-mini');
    await spent(3, 50, 'openai', 'gpt-4o'); // another model: not counted
    await spent(3, 40, 'anthropic', 'gpt-4o-mini'); // another kind: not counted
    await spent(12, 30, 'openai', 'gpt-4o-mini'); // before the period: not counted
    const start = Math.floor((Date.now() - 10 * DAY_MS) / 1000);
    const end = Math.floor((Date.now() + 20 * DAY_MS) / 1000);
    const created = await f.client.post<Commitment>('/commitments', {
      provider_kind: 'openai', label: 'mini prepaid', amount_usd: 100, period_start: start, period_end: end, discount_pct: 20, models: ['gpt-4o-mini'],
    });
    expect(created.status).toBe(201);
    // $35 at list, $28 after 20% off; the last week's $15 is $12, $12/7 a day.
    const burn = 12 / 7;
    expect(created.body).toMatchObject({ consumed_usd: 28, remaining_usd: 72, projected_exhaustion_at: null });
    expect(created.body.burn_rate_usd_per_day as number).toBeCloseTo(burn, 6);
    expect(created.body.projected_unused_usd as number).toBeCloseTo(72 - burn * 20, 2);

    // A smaller commitment runs out before its end: 20 - 28 is nothing left; at 5, it runs out in 5 / burn days.
    const small = await f.client.patch<Commitment>(`/commitments/${created.body.id}`, { amount_usd: 33 }, '"1"');
    expect(small.body).toMatchObject({ remaining_usd: 5, projected_unused_usd: 0 });
    const exhaustion = small.body.projected_exhaustion_at as number;
    expect(exhaustion).toBeGreaterThan(Date.now() / 1000 + (5 / burn) * 86_400 - 120);
    expect(exhaustion).toBeLessThan(Date.now() / 1000 + (5 / burn) * 86_400 + 120);

    // The budget forecast covers it too: a spend.forecast_over_budget finding on the commitment.
    await runDetector(f.database.db, detectorNamed('budget-forecast'), new Date(), { anomalyDollarFloor: 5, everyMs: 300_000, catalog: () => Promise.reject(new Error('unused')) }, null);
    const [forecast] = await f.database.db.select().from(findings)
      .where(and(eq(findings.orgId, f.tenant.orgId), eq(findings.type, 'spend.forecast_over_budget'), eq(findings.scopeKind, 'commitment')));
    expect(forecast).toMatchObject({ scopeId: created.body.id, subject: { budget: 'commitment' }, threshold: 33, expected: 28, status: 'open' });
    expect(Date.parse(String(forecast!.evidence.projected_exhaustion_at)) / 1000).toBeCloseTo(exhaustion, -2);

    const all = await f.client.patch<Commitment>(`/commitments/${created.body.id}`, { models: null, discount_pct: null }, '"2"');
    expect(all.body).toMatchObject({ consumed_usd: 85, models: null });
  });

  it('matches a provider\'s snapshot name to its model, counts video spend, includes a date-only end\'s day, and says when it is exhausted (issue 33)', async () => {
    // Anthropic here, so the first test's OpenAI rows do not count.
    await spent(1, 3, 'anthropic', 'claude-3-5-haiku-20241022');
    await spent(2, 4, 'anthropic', 'claude-3-5-haiku-latest');
    await spent(1, 100, 'anthropic', 'claude-3-5-sonnet-20241022'); // another model
    const start = Math.floor((Date.now() - 5 * DAY_MS) / 1000);
    const created = await f.client.post<Commitment>('/commitments', {
      provider_kind: 'anthropic', label: 'haiku', amount_usd: 6, period_start: start, period_end: Math.floor((Date.now() + 5 * DAY_MS) / 1000), models: ['claude-3-5-haiku-latest'],
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ consumed_usd: 7, remaining_usd: 0, exhausted: true });
    // Run out already: it says about when, not null.
    expect(created.body.projected_exhaustion_at).toEqual(expect.any(Number));
    expect(created.body.projected_exhaustion_at as number).toBeLessThanOrEqual(Date.now() / 1000);

    // A video job's settled spend counts for its model.
    await spent(1, 0.4, 'openai', 'openai/sora-2', { jobId: newId('job') });
    const video = await f.client.post<Commitment>('/commitments', {
      provider_kind: 'openai', label: 'video', amount_usd: 10, period_start: start, period_end: Math.floor((Date.now() + 5 * DAY_MS) / 1000), models: ['sora-2'],
    });
    expect(video.body).toMatchObject({ consumed_usd: 0.4, exhausted: false });

    // A date-only end is that whole day: up to the next day's start.
    const dated = await f.client.post<Commitment>('/commitments', { provider_kind: 'openai', label: 'year', amount_usd: 1, period_start: '2026-01-01', period_end: '2026-12-31' });
    expect(dated.body.period_end).toBe(Date.UTC(2027, 0, 1) / 1000);
  });

  it('refuses a period that ends before it starts, and an unknown provider kind', async () => {
    const backwards = await f.client.post('/commitments', { provider_kind: 'openai', label: 'x', amount_usd: 1, period_start: '2026-02-01T00:00:00Z', period_end: '2026-01-01T00:00:00Z' });
    expect([backwards.status, backwards.body.error?.message]).toEqual([400, expect.stringContaining('period_end')]);
    const unknown = await f.client.post('/commitments', { provider_kind: 'acme', label: 'x', amount_usd: 1, period_start: 0, period_end: 10 });
    expect([unknown.status, unknown.body.error?.message]).toEqual([400, expect.stringContaining('provider_kind')]);
  });
});
