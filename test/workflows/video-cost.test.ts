import { eq } from 'drizzle-orm';
import { jobs, spendLedger } from '../../core/db/schema';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { videoClient } from '../helpers/video-client';
import { manageClient } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';

const SCALE = 0.00003;

/**
 * Issue 20 item 8: a video job is held and settled for what is rendered. Veo's finished
 * operation states no duration, so the seconds are the ones asked (the model's default when
 * none is), sent explicitly; a body field that would render more (another length, more
 * samples) is refused, naming it; each wire gets only its own parameters; a size or resolution
 * is priced as its variant.
 */
describe('video job cost: what is rendered is what is held and settled', () => {
  const prefix = uniquePrefix('vcost');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true' };
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  let secret: string;
  let seq = 0;

  beforeAll(async () => {
    f = await startChatFixture(env);
    workers = await startTestWorkers(['jobs'], prefix, env);
    await f.connect('openai', { name: 'sora' });
    await f.connect('google', { name: 'veo' });
    secret = await f.key({ rate_limit_rpm: 50000 });
  });
  afterAll(async () => {
    await workers?.shutdown();
    await f.close();
  });

  const { call, until, terminal } = videoClient(() => f, () => secret);
  const post = (body: Record<string, unknown>, key = secret) => call('POST', '/v1/videos', body, {}, key);
  const ledger = async (jobId: string) => (await f.database.db.select().from(spendLedger).where(eq(spendLedger.jobId, jobId)))[0];
  /** The bodies of this job's submits that reached the sandbox. */
  const submitted = async (jobId: string, path: string) => {
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, jobId));
    expect(row).toBeDefined();
    return f.sandbox.received.filter((r) => r.path === path && (r.headers['idempotency-key'] as string | undefined)?.startsWith(`${jobId}-`)).map((r) => r.body as Loose);
  };
  const veoSubmits = () => f.sandbox.received.filter((r) => r.path.endsWith(':predictLongRunning')).map((r) => r.body as Loose);

  it('settles a Veo job without duration_seconds at the 8 s it rendered, the seconds it held, asked explicitly', async () => {
    const rendered = f.sandbox.videoRenderedSeconds();
    const before = veoSubmits().length;
    const created = await post({ model: 'google/veo-3.0-generate-001', prompt: `no length [sandbox render_ms=50] ${seq++}` });
    expect(created.status).toBe(202);
    // Veo 3 lists at $0.40 a second; its default length is 8 s.
    expect(await ledger(created.json.id)).toMatchObject({ state: 'reserved', amount: 3.2 });
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', output: { duration_seconds: 8, resolution: '720p', aspect_ratio: '16:9' }, usage: { seconds: 8, cost: 3.2, price_source: 'list' } });
    expect(await ledger(created.json.id)).toMatchObject({ state: 'settled', amount: 3.2 });
    expect(veoSubmits().slice(before).map((b) => b.parameters)).toEqual([{ durationSeconds: 8 }]);
    expect(f.sandbox.videoRenderedSeconds() - rendered).toBe(8);
  });

  it('holds and settles a Sora job without duration_seconds at its 4 s default', async () => {
    const created = await post({ model: 'openai/sora-2', prompt: `sora default [sandbox render_ms=50] ${seq++}` });
    expect(created.status).toBe(202);
    expect(await ledger(created.json.id)).toMatchObject({ state: 'reserved', amount: 0.4 });
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', usage: { seconds: 4, cost: 0.4, price_source: 'list' } });
    expect(await ledger(created.json.id)).toMatchObject({ state: 'settled', amount: 0.4, provider: 'openai', model: 'openai/sora-2' });
    expect((await submitted(created.json.id, '/openai/v1/videos')).map((b) => b.seconds)).toEqual(['4']);
  });

  it.each([
    ['sampleCount', 4],
    ['numberOfVideos', 2],
    ['n', 2],
    ['seconds', '12'],
    ['durationSeconds', 8],
  ])('refuses `%s` (it would render more than is held), naming it, before anything starts', async (field, value) => {
    const submitsBefore = f.sandbox.videoSubmits();
    const model = field === 'seconds' || field === 'n' ? 'openai/sora-2' : 'google/veo-3.0-generate-001';
    const refused = await post({ model, prompt: `more [sandbox render_ms=20] ${seq++}`, duration_seconds: field === 'seconds' ? 4 : 8, [field]: value });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({ type: 'invalid_request_error', param: field, message: expect.stringContaining(`\`${field}\``) });
    expect(f.sandbox.videoSubmits()).toBe(submitsBefore);
  });

  it('sends each wire only its own parameters: a price-neutral one is passed on, unknown ones are not', async () => {
    const rendered = f.sandbox.videoRenderedSeconds();
    const before = veoSubmits().length;
    const created = await post({ model: 'google/veo-3.0-generate-001', prompt: `portrait [sandbox render_ms=50] ${seq++}`, aspectRatio: '9:16', mood: 'calm', parameters: { sampleCount: 4 }, size: '1792x1024' });
    expect(created.status).toBe(202);
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', output: { aspect_ratio: '9:16', duration_seconds: 8 }, usage: { seconds: 8, cost: 3.2 } });
    expect(veoSubmits().slice(before).map((b) => b.parameters)).toEqual([{ aspectRatio: '9:16', durationSeconds: 8 }]);
    expect(f.sandbox.videoRenderedSeconds() - rendered).toBe(8);
    // A wire parameter that is not a string is refused, naming it.
    const bad = await post({ model: 'google/veo-3.0-generate-001', prompt: 'x', aspectRatio: 16 });
    expect([bad.status, bad.json.error?.param]).toEqual([400, 'aspectRatio']);
  });

  it('prices the size or resolution asked as its list variant; one the list does not name is unpriced', async () => {
    // sora-2-pro lists at $0.30 a second, $0.50 at 1792x1024.
    const large = await post({ model: 'openai/sora-2-pro', prompt: `wide [sandbox render_ms=50] ${seq++}`, size: '1792x1024', duration_seconds: 4 });
    expect(large.status).toBe(202);
    expect(await ledger(large.json.id)).toMatchObject({ state: 'reserved', amount: 2 });
    const done = await until(large.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', output: { resolution: '1792x1024' }, usage: { seconds: 4, cost: 2, price_source: 'list' } });
    expect(await ledger(large.json.id)).toMatchObject({ state: 'settled', amount: 2 });
    expect((await submitted(large.json.id, '/openai/v1/videos')).map((b) => [b.size, b.seconds])).toEqual([['1792x1024', '4']]);

    const small = await post({ model: 'openai/sora-2-pro', prompt: `narrow ${seq++}`, duration_seconds: 4 });
    expect(await ledger(small.json.id)).toMatchObject({ state: 'reserved', amount: 1.2 });

    // A resolution no list row names cannot be priced: refused under a blocking limit.
    const limited = await f.key({ credit_limit: { amount: 50, period: 'monthly' }, rate_limit_rpm: 50000 });
    const unknown = await post({ model: 'google/veo-3.0-generate-001', prompt: 'x', resolution: '4k' }, limited);
    expect([unknown.status, unknown.json.error?.code]).toEqual([402, 'unpriced_model_under_budget']);
    const listed = await post({ model: 'google/veo-3.0-generate-001', prompt: `hd [sandbox render_ms=20] ${seq++}`, resolution: '1080p' }, limited);
    expect(listed.status).toBe(202);
    expect(await ledger(listed.json.id)).toMatchObject({ state: 'reserved', amount: 3.2 });
  });

  it('records the cost-center allocation in force when the job was accepted, split to the nano-dollar (issue 23)', async () => {
    const center = async (code: string) => (await f.client.post<{ id: string }>('/cost_centers', { name: code, code })).body.id;
    const [video, media] = [await center(`video-${seq}`), await center(`media-${seq}`)];
    const rule = await f.client.post<{ id: string; version_id: string }>('/cost_center_rules', {
      match: { provider: 'openai', model: 'openai/sora-*' }, priority: 1,
      allocation: [{ cost_center_id: video, percent: 33.33 }, { cost_center_id: media, percent: 66.67 }],
    });
    expect(rule.status).toBe(201);
    await new Promise((done) => setTimeout(done, 150));
    const created = await post({ model: 'openai/sora-2', prompt: `split [sandbox render_ms=1500] ${seq++}`, duration_seconds: 4 });
    expect(created.status).toBe(202);
    // Changed while the job renders: the job keeps the version in force when it was accepted.
    const patched = await f.client.patch(`/cost_center_rules/${rule.body.id}`, { cost_center_id: media }, '"1"');
    expect(patched.status).toBe(200);
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', usage: { cost: 0.4 } });
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
    expect([row!.costRuleId, row!.costRuleVersionId]).toEqual([rule.body.id, rule.body.version_id]);
    // $0.40 is 400,000,000 nano-dollars: 33.33% is 133,320,000 exactly, the rest 266,680,000.
    expect(row!.costAllocation).toEqual([{ cost_center_id: video, percent: 33.33, cost: 0.13332 }, { cost_center_id: media, percent: 66.67, cost: 0.26668 }]);
  });

  it('counts video spend in usage: usage, cost-center usage and the ledger agree to the nano-dollar (issue 33)', async () => {
    const nanos = (dollars: number) => Math.round(dollars * 1e9);
    const created = await post({ model: 'openai/sora-2', prompt: `usage [sandbox render_ms=50] ${seq++}`, duration_seconds: 4 });
    await until(created.json.id, terminal);
    // Every job of this organization has ended (the last test's reservation aside, which usage does not count).
    const from = Math.floor(Date.now() / 1000) - 86_400;
    const to = Math.floor(Date.now() / 1000) + 7_200;
    const plain = await f.client.get<Loose>(`/usage?bucket=hour&from=${from}&to=${to}`);
    const grouped = await f.client.get<Loose>(`/usage?bucket=hour&from=${from}&to=${to}&group_by=cost_center`);
    const settled = (await f.database.db.select().from(spendLedger).where(eq(spendLedger.orgId, f.tenant.orgId))).filter((l) => l.state === 'settled');
    const ledgerNanos = settled.reduce((sum, l) => sum + nanos(l.amount), 0);
    expect(ledgerNanos).toBeGreaterThan(0);
    expect(nanos(plain.body.totals.cost)).toBe(ledgerNanos);
    expect((grouped.body.data as Loose[]).reduce((sum, b) => sum + nanos(b.cost), 0)).toBe(ledgerNanos);
    const bySora = await f.client.get<Loose>(`/usage?bucket=day&from=${from}&to=${to}&group_by=model`);
    expect((bySora.body.data as Loose[]).some((b) => b.group.model === 'openai/sora-2' && b.requests >= 1)).toBe(true);
  });

  it('lists the organization\'s jobs to a management token, with one job\'s timeline and workflow (issue 25)', async () => {
    const created = await post({ model: 'openai/sora-2', prompt: `timeline [sandbox render_ms=50] ${seq++}`, duration_seconds: 4 });
    await until(created.json.id, terminal);
    const list = await f.client.get<Loose>('/jobs?status=succeeded&limit=100');
    expect(list.status).toBe(200);
    expect((list.body.data as Loose[]).map((j) => j.id)).toContain(created.json.id);
    expect((list.body.data as Loose[]).every((j) => j.status === 'succeeded')).toBe(true);
    const one = await f.client.get<Loose>(`/jobs/${created.json.id}`);
    expect(one.body).toMatchObject({ id: created.json.id, object: 'job', status: 'succeeded', provider: 'openai', workflow: { id: created.json.id } });
    expect((one.body.timeline as Loose[]).map((e) => e.event)).toEqual(expect.arrayContaining(['created', 'started', 'succeeded', 'output_expires']));
    expect((await f.client.get<Loose>('/jobs?status=done')).status).toBe(400);
    const stranger = manageClient(f.api.url, (await createTenant(f.database.db)).token);
    expect((await stranger.get(`/jobs/${created.json.id}`)).status).toBe(404);
    expect(((await stranger.get<Loose>('/jobs')).body.data as Loose[])).toEqual([]);
  });
});
