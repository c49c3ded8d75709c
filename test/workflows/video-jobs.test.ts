import fs from 'node:fs';
import path from 'node:path';
import { and, eq } from 'drizzle-orm';
import type { VideoJobHooks } from '../../activities/video-job';
import { jobEvents, jobs, providerConnections, spendLedger } from '../../core/db/schema';
import { videoBytes } from '../../sandbox/video';
import { downloadsQueue, taskQueue, workflowIds } from '../../workflows/definitions';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { saveHistory } from '../helpers/histories';
import { videoClient } from '../helpers/video-client';
import { testDataConverter } from '../helpers/sealing-keys';
import type { Payload } from '@temporalio/common';

/** A day of retention lasts about 2.6 s here; status checks come every 2 to 9 ms. */
const SCALE = 0.00003;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Video jobs end to end on the Temporal dev server (spec 2.1, 3.1, 4.2): the API starts the
 * `videoJob` workflow, real workers run it against the sandbox's video APIs.
 */
describe('video jobs', () => {
  const prefix = uniquePrefix('jobs');
  // Workers reach the sandbox on loopback, as the API does (the outbound guard refuses it otherwise).
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true' };
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  let secret: string;
  let seq = 0;

  beforeAll(async () => {
    f = await startChatFixture(env);
    workers = await startTestWorkers(['jobs'], prefix, env);
    await f.connect('openai', { name: 'videos' });
    secret = await f.key({ rate_limit_rpm: 50000 });
  });
  afterAll(async () => {
    await workers?.shutdown();
    await f.close();
  });

  const { call, submit, read, until, terminal } = videoClient(() => f, () => secret);
  const history = (name: string, jobId: string) => saveHistory(`video-job-${name}`, workflowIds.videoJob(jobId));
  async function waitFor(what: string, done: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`${what}: never happened`);
      await sleep(20);
    }
  }
  /** Submits of this job that reached a sandbox connection without failure directives. */
  const submitsOf = (jobId: string) => f.sandbox.received.filter((r) => r.path === '/openai/v1/videos' && String(r.headers['idempotency-key']).startsWith(`${jobId}-`));
  /** The job's ledger row, and what the providers bill for its renders (the sandbox's bill, by Idempotency-Key). */
  const ledgerOf = async (jobId: string) => (await f.database.db.select().from(spendLedger).where(eq(spendLedger.jobId, jobId)))[0];
  const billedFor = (jobId: string) => f.sandbox.bill.all().filter((l) => l.idempotencyKey?.startsWith(`${jobId}-`)).reduce((sum, l) => sum + (l.usd ?? 0), 0);
  /** Workers like startTestWorkers', with the activities' test hooks. */
  const startHookedWorkers = (hooks: VideoJobHooks) =>
    startTestWorkers(['jobs'], prefix, env, (services) => ({ ...services, video: { ...services.video, ...hooks } }));

  // First, before any test enters a custom rate for sora-2.
  it('prices a video at the provider\'s published per-second list rate when no custom rate is set', async () => {
    const created = await submit({ prompt: `listed [sandbox render_ms=50] ${seq++}` });
    expect(created.status).toBe(202);
    const [reserved] = await f.database.db.select().from(spendLedger).where(eq(spendLedger.jobId, created.json.id));
    expect(reserved).toMatchObject({ state: 'reserved', amount: 0.4 });
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', usage: { seconds: 4, cost: 0.4, price_source: 'list' } });
    const [settled] = await f.database.db.select().from(spendLedger).where(eq(spendLedger.jobId, created.json.id));
    expect(settled).toMatchObject({ state: 'settled', amount: 0.4 });
    // Its payloads sealed (issue 34): the replay tests open this history with the test keyring.
    await history('succeeded-sealed-payloads', created.json.id);
  });

  it('runs end to end: queued, progress, success, download, expiry, retention', async () => {
    expect((await f.client.post('/model_prices', { model: 'openai/sora-2', unit: 0.1, note: 'per second' })).status).toBe(201);
    await f.settle();
    const created = await submit({ prompt: `a cat surfing [sandbox render_ms=400] ${seq++}` });
    expect(created.status).toBe(202);
    expect(created.json).toMatchObject({ object: 'job', type: 'video.generation', status: 'queued', model: 'openai/sora-2', route: null, provider: null, connection: null, progress: 0, output: null, usage: null, error: null, started_at: null });
    expect(created.json.id).toMatch(/^job_/);

    const running = await until(created.json.id, (j) => j.status === 'running' && j.progress > 0);
    expect(running).toMatchObject({ route: 'primary', provider: 'openai', connection: expect.stringMatching(/^conn_/), started_at: expect.any(Number) });
    expect(running.progress).toBeLessThan(1);

    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', progress: 1, error: null, usage: { seconds: 4, cost: 0.4, price_source: 'custom' } });
    expect(done.output).toMatchObject({ duration_seconds: 4, resolution: '1280x720', aspect_ratio: '16:9', mime_type: 'video/mp4' });
    expect(done.expires_at - done.completed_at).toBeGreaterThanOrEqual(Math.floor(86_400 * SCALE) - 1);
    const url = new URL(done.output.url);
    expect([url.searchParams.get('exp'), url.searchParams.get('sig')]).toEqual([expect.stringMatching(/^\d+$/), expect.stringMatching(/^[0-9a-f]{64}$/)]);

    const [job] = await f.database.db.select().from(jobs).where(eq(jobs.id, done.id));
    const file = await fetch(done.output.url);
    expect([file.status, file.headers.get('content-type'), file.headers.get('content-disposition')]).toEqual([200, 'video/mp4', null]);
    expect(Buffer.from(await file.arrayBuffer()).equals(videoBytes(job!.providerJobId!))).toBe(true);
    const download = await fetch(`${done.output.url}&download=1`);
    expect(download.headers.get('content-disposition')).toBe(`attachment; filename="${done.id}.mp4"`);
    await download.arrayBuffer();
    const tampered = await fetch(done.output.url.replace(/sig=([0-9a-f])/, (_: string, c: string) => `sig=${c === '0' ? '1' : '0'}`));
    expect(tampered.status).toBe(404);

    const events = await f.database.db.select().from(jobEvents).where(eq(jobEvents.jobId, done.id));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'job.succeeded', id: expect.stringMatching(/^evt_/), data: { id: done.id, status: 'succeeded', usage: { cost: 0.4 } } });

    // Retention: the link stops working, the file goes, the job stays readable without output.
    const stored = path.join(process.env.GW_DATA_DIR!, 'outputs', job!.output!.storage_key);
    expect(fs.existsSync(stored)).toBe(true);
    // The job's workflow ended with the job: it does not sleep out the retention (issue 34).
    await f.api.runtime.temporal.workflow.getHandle(done.id).result();
    // The link stops at expires_at; the hourly retention schedule's run deletes the file.
    await waitFor('the output link expiring', async () => (await fetch(done.output.url)).status === 404, 15_000);
    // The link's `exp` is in whole seconds; the row's expiry is what the retention run reads.
    await waitFor('the output expiring', async () => {
      const [row] = await f.database.db.select({ expiresAt: jobs.expiresAt }).from(jobs).where(eq(jobs.id, done.id));
      return row!.expiresAt!.getTime() < Date.now();
    }, 15_000);
    const maintenance = await startTestWorkers(['maintenance'], prefix, env);
    try {
      const result = await f.api.runtime.temporal.workflow.execute('requestLogRetention', { workflowId: `${prefix}retention-${done.id}`, taskQueue: taskQueue('maintenance', prefix), args: [] });
      expect(result).toMatchObject({ jobOutputsDeleted: expect.any(Number) });
      expect((result as { jobOutputsDeleted: number }).jobOutputsDeleted).toBeGreaterThanOrEqual(1);
    } finally {
      await maintenance.shutdown();
    }
    const expired = (await read(done.id)).json;
    expect(expired).toMatchObject({ status: 'succeeded', output: null, expires_at: null, usage: { cost: 0.4 } });
    expect((await fetch(done.output.url)).status).toBe(404);
    expect(fs.existsSync(stored)).toBe(false);
    await history('succeeded-await-render', done.id);
  });

  it('renders through Gemini Veo\'s long-running operations', async () => {
    const f2Key = secret;
    await f.connect('google', { name: 'veo' });
    const created = await call('POST', '/v1/videos', { model: 'google/veo-3.0-generate-001', prompt: `ocean [sandbox render_ms=200] ${seq++}`, duration_seconds: 8 }, {}, f2Key);
    expect(created.status).toBe(202);
    const done = await until(created.json.id, terminal);
    // Veo 3 is priced at Google's published $0.40 a second (core/pricing/video-list-prices.json).
    expect(done).toMatchObject({ status: 'succeeded', provider: 'google', output: { duration_seconds: 8, resolution: '720p', aspect_ratio: '16:9' }, usage: { seconds: 8, cost: 3.2, price_source: 'list' } });
    expect((await fetch(done.output.url)).status).toBe(200);
  });

  it('fails over between targets during submit only', async () => {
    const broken = await f.connect('openai', { directives: 'status=503', name: 'broken video' });
    const good = await f.connect('openai', { name: 'good video' });
    const slug = `video-route-${seq++}`;
    expect((await f.client.post('/routes', { slug, targets: [{ connection_id: broken, model: 'sora-2' }, { connection_id: good, model: 'sora-2' }], max_retries: 0 })).status).toBe(201);
    await f.settle();
    const created = await submit({ model: slug, prompt: `failover [sandbox render_ms=100] ${seq++}` });
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', route: 'standby_a', connection: good, model: 'sora-2' });

    const allBroken = `video-broken-${seq++}`;
    expect((await f.client.post('/routes', { slug: allBroken, targets: [{ connection_id: broken, model: 'sora-2' }], max_retries: 0 })).status).toBe(201);
    await f.settle();
    const failed = await until((await submit({ model: allBroken, prompt: 'nope' })).json.id, terminal);
    expect(failed).toMatchObject({ status: 'failed', usage: null, output: null, completed_at: expect.any(Number), error: { type: 'upstream_error', message: expect.stringContaining(broken) } });
  });

  it('ends failed when the provider reports the render failed', async () => {
    const created = await submit({ prompt: `doomed [sandbox render_ms=50 video_fail] ${seq++}` });
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'failed', usage: null, output: null, error: { type: 'upstream_error', message: expect.stringContaining('render') } });
    const [event] = await f.database.db.select().from(jobEvents).where(eq(jobEvents.jobId, done.id));
    expect(event!.type).toBe('job.failed');
    // The provider bills no failed render, and the ledger gives the reservation back.
    expect(billedFor(done.id)).toBe(0);
    expect(await ledgerOf(done.id)).toMatchObject({ state: 'released' });
    await f.api.runtime.temporal.workflow.getHandle(done.id).result();
    await history('failed-await-render', done.id);
  });

  it('times out after 60 status checks without a final answer', async () => {
    const created = await submit({ prompt: `forever [sandbox never_finish] ${seq++}` });
    const done = await until(created.json.id, terminal, 30_000);
    expect(done).toMatchObject({ status: 'failed', error: { type: 'request_timeout' }, usage: null });
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, done.id));
    expect(row!.statusChecks).toBe(60);
    // The job shows no cost (spec 8), but the provider bills the render it never said was done:
    // the ledger settles what was reserved for it, 4 s of sora-2 at $0.10 (issue 54, item 8).
    expect(billedFor(done.id)).toBeCloseTo(0.4, 9);
    expect(await ledgerOf(done.id)).toMatchObject({ state: 'settled', amount: 0.4, model: 'openai/sora-2' });
    // The checks ride one activity's retries: a handful of history events, not one timer and one activity per check.
    const events = (await f.api.runtime.temporal.workflow.getHandle(done.id).fetchHistory()).events ?? [];
    expect(events.length).toBeLessThanOrEqual(60);
    await history('timed-out', done.id);
  });

  it('shows the waiting render in Temporal as the awaitRender activity: its attempt, last failure with progress, next retry', async () => {
    const created = await submit({ prompt: `watched [sandbox render_ms=4000] ${seq++}` });
    let pending: { activityType?: { name?: string | null } | null; attempt?: number | null; lastFailure?: { message?: string | null; encodedAttributes?: Payload | null } | null; nextAttemptScheduleTime?: unknown } | undefined;
    await waitFor('a retried awaitRender', async () => {
      const description = await f.api.runtime.temporal.workflow.getHandle(created.json.id).describe();
      pending = description.raw.pendingActivities?.[0] ?? undefined;
      return (pending?.attempt ?? 0) > 2 && pending?.activityType?.name === 'awaitRender';
    });
    // Sealed with the payloads (issue 55): the UI opens it through the codec endpoint, as here.
    expect(pending!.lastFailure?.message).toBe('Encoded failure');
    const [opened] = await testDataConverter().payloadCodecs[0]!.decode([pending!.lastFailure!.encodedAttributes!]);
    expect((JSON.parse(Buffer.from(opened!.data!).toString('utf8')) as { message: string }).message).toMatch(/^render running: progress \d+% after check \d+ of 60; next check in \d+ ms$/);
    await until(created.json.id, terminal);
  });

  it('cancels a running job: canceled, no cost, completed_at; a second cancel is 400', async () => {
    const created = await submit({ prompt: `long [sandbox never_finish] ${seq++}` });
    await until(created.json.id, (j) => j.status === 'running');
    const canceled = await call('POST', `/v1/jobs/${created.json.id}/cancel`);
    expect(canceled.status).toBe(200);
    expect(canceled.json).toMatchObject({ status: 'canceled', usage: null, output: null, completed_at: expect.any(Number) });
    // No cost on the job (spec 8); the render the provider took is billed, and the ledger counts it (issue 54, item 8).
    expect(billedFor(created.json.id)).toBeCloseTo(0.4, 9);
    expect(await ledgerOf(created.json.id)).toMatchObject({ state: 'settled', amount: 0.4 });
    const again = await call('POST', `/v1/jobs/${created.json.id}/cancel`);
    expect([again.status, again.json.error?.type]).toEqual([400, 'invalid_request_error']);
    const [event] = await f.database.db.select().from(jobEvents).where(eq(jobEvents.jobId, created.json.id));
    expect(event!.type).toBe('job.canceled');
    await f.api.runtime.temporal.workflow.getHandle(created.json.id).result();
    await history('canceled-await-render', created.json.id);
  });

  it('cancels a queued job before anything is submitted', async () => {
    const submitsBefore = f.sandbox.videoSubmits();
    await workers!.shutdown();
    workers = null;
    const created = await submit({ prompt: `queued ${seq++}` });
    expect(created.json.status).toBe('queued');
    // No jobs worker polls: the cancel is recorded in Postgres and answered (issue 34).
    const answer = await call('POST', `/v1/jobs/${created.json.id}/cancel`);
    expect(answer.json).toMatchObject({ status: 'canceled', started_at: null, provider: null, completed_at: expect.any(Number) });
    const [event] = await f.database.db.select().from(jobEvents).where(eq(jobEvents.jobId, created.json.id));
    expect(event!.type).toBe('job.canceled');
    // The workflow honours it once a worker picks it up: nothing is submitted.
    workers = await startTestWorkers(['jobs'], prefix, env);
    expect(await f.api.runtime.temporal.workflow.getHandle(created.json.id).result()).toEqual({ status: 'canceled' });
    expect(f.sandbox.videoSubmits()).toBe(submitsBefore);
    expect((await read(created.json.id)).json.status).toBe('canceled');
    // Nothing rendered, nothing billed: the reservation is given back.
    expect(await ledgerOf(created.json.id)).toMatchObject({ state: 'released' });
    await history('canceled-recorded-in-postgres', created.json.id);
  });

  it('answers a cancel that races completion with the completed job', async () => {
    const created = await submit({ prompt: `race [sandbox render_ms=50 content_delay_ms=1500] ${seq++}` });
    const [row] = await f.database.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.id, created.json.id));
    expect(row).toBeDefined();
    // Once the output download has begun, completion is under way.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const [job] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
      if (job?.providerJobId && f.sandbox.received.some((r) => r.path.endsWith(`/videos/${job.providerJobId}/content`))) break;
      if (Date.now() > deadline) throw new Error('download never started');
      await sleep(20);
    }
    const canceled = await call('POST', `/v1/jobs/${created.json.id}/cancel`);
    expect(canceled.status).toBe(200);
    expect(canceled.json).toMatchObject({ status: 'succeeded', output: { mime_type: 'video/mp4' }, usage: { seconds: 4 } });
  });

  it('replays an Idempotency-Key: the first 202 as it was, one render; another body is refused', async () => {
    const key = `idem-${seq++}`;
    const body = { prompt: `once [sandbox render_ms=100] ${seq++}` };
    const before = f.sandbox.videoSubmits();
    const first = await submit(body, { 'idempotency-key': key });
    await until(first.json.id, terminal);
    const replay = await submit(body, { 'idempotency-key': key });
    expect([replay.status, replay.json]).toEqual([202, first.json]);
    expect(replay.json.status).toBe('queued');
    expect(f.sandbox.videoSubmits()).toBe(before + 1);
    const reuse = await submit({ prompt: 'something else' }, { 'idempotency-key': key });
    expect([reuse.status, reuse.json.error?.code]).toEqual([400, 'idempotency_key_reuse']);
  });

  it('submits exactly once when the worker is killed after submit and replaced', async () => {
    const rendersBefore = f.sandbox.videoSubmits();
    const created = await submit({ prompt: `durable [sandbox render_ms=1500] ${seq++}` });
    await until(created.json.id, (j) => j.status === 'running');
    await workers!.shutdown();
    workers = await startTestWorkers(['jobs'], prefix, env);
    const done = await until(created.json.id, terminal);
    expect(done.status).toBe('succeeded');
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
    // Connections made by earlier tests may refuse first (503); only one submit was accepted.
    const accepted = f.sandbox.received.filter((r) => r.path === '/openai/v1/videos' && String(r.headers['idempotency-key']).startsWith(`${created.json.id}-`));
    expect(accepted).toHaveLength(1);
    expect(f.sandbox.videoSubmits() - rendersBefore).toBe(1);
    expect(row!.providerJobId).toBeTruthy();
  });

  it('cancel during a slow submit answers within 5 s: the submit in flight is abandoned, the job canceled', async () => {
    const submitsBefore = f.sandbox.videoSubmits();
    const abandonedBefore = f.sandbox.abandonedVideoSubmits();
    const created = await submit({ prompt: `slow submit [sandbox submit_delay_ms=30000] ${seq++}` });
    await waitFor('the submit reaching the provider', () => submitsOf(created.json.id).length > 0);
    const started = Date.now();
    const canceled = await call('POST', `/v1/jobs/${created.json.id}/cancel`);
    const took = Date.now() - started;
    expect(canceled.status).toBe(200);
    expect(canceled.json).toMatchObject({ status: 'canceled', usage: null, output: null, started_at: null, completed_at: expect.any(Number) });
    // The bound: within 5 s, whatever the provider is doing.
    expect(took).toBeLessThan(5_000);
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
    expect(row!.status).toBe('canceled');
    const [event] = await f.database.db.select().from(jobEvents).where(eq(jobEvents.jobId, created.json.id));
    expect(event!.type).toBe('job.canceled');
    expect(await f.api.runtime.temporal.workflow.getHandle(created.json.id).result()).toEqual({ status: 'canceled' });
    await history('canceled-during-submit-update', created.json.id);
    // The activity heard the cancel (by its heartbeat) and hung up: the slow provider started no render.
    await waitFor('the submit in flight being aborted', () => f.sandbox.abandonedVideoSubmits() > abandonedBefore, 15_000);
    expect(f.sandbox.videoSubmits()).toBe(submitsBefore);
  });

  it('a cancel meeting a completion under way answers within 5 s, and the copy it beat leaves no file (issue 55)', async () => {
    // The render is done at once; its download is answered 8 s late.
    const created = await submit({ prompt: `slow download [sandbox render_ms=20 content_delay_ms=8000] ${seq++}` });
    const contentPath = (id: string) => f.sandbox.received.some((r) => r.path.startsWith('/openai/v1/videos/') && r.path.endsWith('/content') && r.path.includes(id));
    await waitFor('the copy of the output starting', async () => {
      const [row] = await f.database.db.select({ providerJobId: jobs.providerJobId }).from(jobs).where(eq(jobs.id, created.json.id));
      return row?.providerJobId ? contentPath(row.providerJobId) : false;
    }, 20_000);
    const started = Date.now();
    const canceled = await call('POST', `/v1/jobs/${created.json.id}/cancel`);
    const took = Date.now() - started;
    expect(canceled.status).toBe(200);
    expect(canceled.json.status).toBe('canceled');
    // A bound, not a timing measurement: it was 62.5 s.
    expect(took).toBeLessThan(5_500);
    // The copy finishes after the cancel won: the job stays canceled, its file is removed.
    expect(await f.api.runtime.temporal.workflow.getHandle(created.json.id).result()).toEqual({ status: 'canceled' });
    expect((await read(created.json.id)).json).toMatchObject({ status: 'canceled', output: null });
    expect(fs.existsSync(path.join(process.env.GW_DATA_DIR!, 'outputs', 'jobs', created.json.id, 'output.mp4'))).toBe(false);
  });

  it('ends failed with the mapped error when a status check is refused for good (404 render not found, credential rejected), goes on after a passing one', async () => {
    const created = await submit({ prompt: `lost [sandbox render_ms=5000 check_status=404] ${seq++}` });
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'failed', usage: null, output: null, error: { type: 'upstream_error', message: expect.stringContaining('HTTP 404') } });
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
    // One check, not 60: the refusal is final.
    expect(row!.statusChecks).toBe(1);
    const [event] = await f.database.db.select().from(jobEvents).where(eq(jobEvents.jobId, created.json.id));
    expect(event!.type).toBe('job.failed');

    // A rejected credential is as final.
    const rejected = await until((await submit({ prompt: `rejected [sandbox render_ms=5000 check_status=401] ${seq++}` })).json.id, terminal);
    expect(rejected).toMatchObject({ status: 'failed', error: { type: 'upstream_error', message: expect.stringContaining('credential') } });
    // A passing failure (503) counts as a check and the next one goes on.
    const passing = await submit({ prompt: `flaky [sandbox render_ms=50 check_status=503 times=2] ${seq++}` });
    expect(await until(passing.json.id, terminal)).toMatchObject({ status: 'succeeded' });
    const [flaky] = await f.database.db.select().from(jobs).where(eq(jobs.id, passing.json.id));
    expect(flaky!.statusChecks).toBeGreaterThanOrEqual(3);
  });

  it('records the model the route target named, not the deployment name its connection maps it to', async () => {
    const mapped = await f.connect('openai', { name: `mapped video ${seq++}`, extra: { model_map: { 'sora-2': 'sora-house-deployment' } } });
    const slug = `video-mapped-${seq++}`;
    expect((await f.client.post('/routes', { slug, targets: [{ connection_id: mapped, model: 'sora-2' }] })).status).toBe(201);
    await f.settle();
    const created = await submit({ model: slug, prompt: `mapped [sandbox render_ms=50] ${seq++}` });
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', connection: mapped, route: 'primary', model: 'sora-2' });
    // The provider was asked for the deployment; the job names the model.
    expect(submitsOf(created.json.id).map((r) => (r.body as Loose).model)).toEqual(['sora-house-deployment']);
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
    expect(row!.model).toBe('sora-2');
  });

  it('submits exactly once when the worker dies after the provider accepted and before the row recorded it', async () => {
    const rendersBefore = f.sandbox.videoSubmits();
    let jobId = '';
    let killed: Promise<void> | null = null;
    await workers!.shutdown();
    workers = null;
    const hooked = await startHookedWorkers({
      afterSubmitAccepted(id) {
        if (id !== jobId || killed) return;
        // The worker goes away in the gap: the provider has the render, the row does not know it.
        killed = hooked.shutdown();
        throw new Error('worker killed between the provider accepting the submit and the row recording it');
      },
    });
    try {
      const created = await submit({ prompt: `gap [sandbox render_ms=300] ${seq++}` });
      jobId = created.json.id;
      await waitFor('the hook killing the worker', () => killed !== null, 20_000);
      await killed;
      const [between] = await f.database.db.select().from(jobs).where(eq(jobs.id, jobId));
      expect([between!.status, between!.providerJobId]).toEqual(['queued', null]);
      expect(f.sandbox.videoSubmits() - rendersBefore).toBe(1);
    } finally {
      await (killed ?? hooked.shutdown());
      workers = await startTestWorkers(['jobs'], prefix, env);
    }
    const done = await until(jobId, terminal);
    expect(done.status).toBe('succeeded');
    // The attempt heartbeated the render's id before it died: the new worker's retry recorded
    // that render without sending the submit again (issue 55).
    expect(submitsOf(jobId)).toHaveLength(1);
    expect(f.sandbox.videoSubmits() - rendersBefore).toBe(1);
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, jobId));
    expect(row!.providerJobId).toBeTruthy();
  });

  it('fails a job whose provider points the download at a link-local address, fetching and storing nothing', async () => {
    await f.connect('google', { name: `veo metadata ${seq++}` });
    const created = await call('POST', '/v1/videos', { model: 'google/veo-3.0-generate-001', prompt: `metadata [sandbox render_ms=20 download_uri=http://169.254.169.254/latest/video.mp4] ${seq++}`, duration_seconds: 8 });
    expect(created.status).toBe(202);
    // Quickly: a refusal, not a download retried twenty times.
    const done = await until(created.json.id, terminal, 10_000);
    expect(done).toMatchObject({ status: 'failed', output: null, usage: null, error: { type: 'upstream_error', message: expect.stringContaining('169.254.169.254') } });
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
    expect(row!.output).toBeNull();
    expect(fs.existsSync(path.join(process.env.GW_DATA_DIR!, 'outputs', 'jobs', created.json.id))).toBe(false);
  });

  it('lists newest first with status and type filters and stable cursor paging', async () => {
    const lister = await f.key({ observability_access: 'organization', rate_limit_rpm: 50000 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await submit({ prompt: `list ${i} [sandbox render_ms=20 video_fail] ${seq++}` }, {}, lister)).json.id);
    for (const id of ids) await until(id, terminal, 20_000, lister);
    const list = (q: string) => call('GET', `/v1/jobs?${q}`, undefined, {}, lister);

    const page1 = await list('limit=2&status=failed');
    expect(page1.json.data.map((j: Loose) => j.id)).toEqual([ids[4], ids[3]]);
    // The cursor is opaque (core/paging.ts): a string on a page that has more.
    expect(page1.json).toMatchObject({ object: 'list', has_more: true, next_cursor: expect.any(String) });
    // A job created between pages does not shift the next page.
    const newer = (await submit({ prompt: `newer [sandbox render_ms=20 video_fail] ${seq++}` }, {}, lister)).json.id;
    const page2 = await list(`limit=2&status=failed&after=${page1.json.next_cursor}`);
    expect(page2.json.data.map((j: Loose) => j.id)).toEqual([ids[2], ids[1]]);
    await until(newer, terminal, 20_000, lister);

    const both = await list('status=failed&status=canceled&type=video.generation&limit=100');
    expect(both.json.data.every((j: Loose) => ['failed', 'canceled'].includes(j.status))).toBe(true);
    expect((await list('type=image.generation')).json.data).toEqual([]);
    expect((await list('status=exploded')).status).toBe(400);
    for (const bad of ['limit=0', 'limit=101', 'limit=x', 'after=nonsense']) expect((await list(bad)).status).toBe(400);
    const defaults = await list('');
    expect(defaults.json.data.length).toBeLessThanOrEqual(20);
  });

  it('keeps jobs within the key\'s reach: 400 on read and cancel outside it', async () => {
    const mine = (await submit({ prompt: `mine [sandbox render_ms=20] ${seq++}` })).json.id;
    const stranger = await f.key({ rate_limit_rpm: 50000 });
    expect((await read(mine, stranger)).status).toBe(400);
    expect((await call('POST', `/v1/jobs/${mine}/cancel`, undefined, {}, stranger)).json.error?.type).toBe('invalid_request_error');
    expect((await read('job_doesnotexist000000000000000')).status).toBe(400);
    const listed = await call('GET', '/v1/jobs?limit=100', undefined, {}, stranger);
    expect(listed.json.data.some((j: Loose) => j.id === mine)).toBe(false);
    const organization = await f.key({ observability_access: 'organization', rate_limit_rpm: 50000 });
    expect((await read(mine, organization)).status).toBe(200);
  });

  it('gives a `scoped` key the reach its request log has: its own lineage, not its project (issue 20)', async () => {
    const created = await f.client.post<{ id: string; secret: string }>('/gateway_keys', { label: `scoped ${seq++}`, project_id: f.tenant.projectId, observability_access: 'scoped', rate_limit_rpm: 50000 });
    expect(created.status).toBe(201);
    const scoped = created.body.secret;
    // Another key's job in the same project is outside a scoped key's reach, on read, list and cancel.
    const others = (await submit({ prompt: `others [sandbox never_finish] ${seq++}` })).json.id;
    expect((await read(others, scoped)).json.error).toMatchObject({ type: 'invalid_request_error' });
    const cancel = await call('POST', `/v1/jobs/${others}/cancel`, undefined, {}, scoped);
    expect([cancel.status, cancel.json.error?.type]).toEqual([400, 'invalid_request_error']);
    expect((await read(others)).json.status).not.toBe('canceled');
    const listed = await call('GET', '/v1/jobs?limit=100', undefined, {}, scoped);
    expect(listed.json.data.some((j: Loose) => j.id === others)).toBe(false);
    // Its own job stays within the reach of the key rotated from it, as its request log does.
    const own = (await submit({ prompt: `own [sandbox render_ms=20] ${seq++}` }, {}, scoped)).json.id;
    const rotated = await f.client.post<{ secret: string }>(`/gateway_keys/${created.body.id}/rotate`, { overlap_seconds: 60 });
    expect(rotated.status).toBe(200);
    expect((await read(own, rotated.body.secret)).json.id).toBe(own);
    const rotatedList = await call('GET', '/v1/jobs?limit=100', undefined, {}, rotated.body.secret);
    expect(rotatedList.json.data.map((j: Loose) => j.id)).toEqual([own]);
    await call('POST', `/v1/jobs/${others}/cancel`);
  });

  it('holds the estimated cost against the key\'s limit: reserved, settled on success, released on failure', async () => {
    await f.client.post('/model_prices', { model: 'openai/sora-2', unit: 0.1 }); // may exist already
    await f.settle();
    const limited = await f.key({ credit_limit: { amount: 0.5, period: 'monthly' }, rate_limit_rpm: 50000 });
    const ledger = async (jobId: string) => (await f.database.db.select().from(spendLedger).where(eq(spendLedger.jobId, jobId)))[0];

    // A failed render gives its reservation back.
    const failed = await submit({ prompt: `budget fail [sandbox render_ms=20 video_fail] ${seq++}` }, {}, limited);
    expect(failed.status).toBe(202);
    expect(await ledger(failed.json.id)).toMatchObject({ state: 'reserved', amount: 0.4 });
    await until(failed.json.id, terminal, 20_000, limited);
    expect(await ledger(failed.json.id)).toMatchObject({ state: 'released' });

    const ok = await submit({ prompt: `budget ok [sandbox render_ms=20] ${seq++}` }, {}, limited);
    expect(ok.status).toBe(202);
    // $0.40 held of $0.50: another 4-second video does not fit, while running or after.
    const refused = await submit({ prompt: 'one too many' }, {}, limited);
    expect([refused.status, refused.json.error?.type, refused.json.error?.code]).toEqual([402, 'budget_exceeded', 'key_budget']);
    await until(ok.json.id, terminal, 20_000, limited);
    expect(await ledger(ok.json.id)).toMatchObject({ state: 'settled', amount: 0.4 });
    expect((await submit({ prompt: 'still too many' }, {}, limited)).json.error?.code).toBe('key_budget');

    // A list-priced model is held at its list rate: 8 s of Veo 3 ($3.20) does not fit.
    const listed = await call('POST', '/v1/videos', { model: 'google/veo-3.0-generate-001', prompt: 'x', duration_seconds: 8 }, {}, limited);
    expect([listed.status, listed.json.error?.code]).toEqual([402, 'key_budget']);
    // An unpriced model (no custom rate, no list price) under a spend limit is refused.
    const unpriced = await call('POST', '/v1/videos', { model: 'google/veo-unlisted-preview', prompt: 'x', duration_seconds: 8 }, {}, limited);
    expect([unpriced.status, unpriced.json.error?.code]).toEqual([402, 'unpriced_model_under_budget']);
    const lifetime = await f.key({ credit_limit: { amount: 0.1, period: 'never' }, rate_limit_rpm: 50000 });
    expect((await submit({ prompt: 'x' }, {}, lifetime)).json.error?.code).toBe('key_lifetime_limit');
  });

  it('ends a job failed, with its event, when an activity gives up (its connection deleted under it)', async () => {
    const doomed = await f.connect('openai', { name: `doomed ${seq++}` });
    const slug = `video-doomed-${seq++}`;
    expect((await f.client.post('/routes', { slug, targets: [{ connection_id: doomed, model: 'sora-2' }] })).status).toBe(201);
    await f.settle();
    const created = await submit({ model: slug, prompt: `orphan [sandbox never_finish] ${seq++}` });
    await until(created.json.id, (j) => j.status === 'running');
    await f.database.db.delete(providerConnections).where(eq(providerConnections.id, doomed));
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'failed', usage: null, error: { type: 'internal_error', message: expect.stringContaining('could not be completed') } });
    const [event] = await f.database.db.select().from(jobEvents).where(eq(jobEvents.jobId, done.id));
    expect(event!.type).toBe('job.failed');
    // The provider took the render and bills it: the reservation is settled, though the job shows no cost (issue 54, item 8).
    expect(billedFor(done.id)).toBeGreaterThan(0);
    expect(await ledgerOf(done.id)).toMatchObject({ state: 'settled', amount: billedFor(done.id) });
  });

  it('refuses a plain-HTTP webhook URL and bodies over 11 MB at submit', async () => {
    const http = await submit({ prompt: 'x', webhook: { url: 'http://hooks.example.com/x' } });
    expect([http.status, http.json.error?.type]).toEqual([400, 'invalid_request_error']);
    const ok = await submit({ prompt: `hooked [sandbox render_ms=20] ${seq++}`, webhook: { url: 'https://hooks.example.com/x', events: ['job.failed'] } });
    expect(ok.status).toBe(202);
    const big = await fetch(`${f.api.url}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/sora-2', prompt: 'x'.repeat(12 * 1024 * 1024) }) });
    expect(big.status).toBe(413);
    const [stored] = await f.database.db.select().from(jobs).where(and(eq(jobs.id, ok.json.id)));
    expect(stored!.webhook).toEqual({ url: 'https://hooks.example.com/x', events: ['job.failed'] });
  });

  // Last: its connections' 1 s timeout would cut the slow downloads of tests that route by model.
  it('lets a Veo submit in flight finish when its worker stops for a deploy, and copies the output on the downloads queue (issue 34)', async () => {
    await f.connect('google', { name: 'veo for a deploy' });
    const before = f.sandbox.videoSubmits();
    const marker = `deploy-${prefix}-${seq++}`;
    const created = await call('POST', '/v1/videos', { model: 'google/veo-3.0-generate-001', prompt: `${marker} [sandbox submit_delay_ms=1500 render_ms=50]`, duration_seconds: 8 });
    expect(created.status).toBe(202);
    // The submit is at the provider, its answer 1.5 s away, when the deploy stops the worker.
    await waitFor('the submit to reach the provider', () => f.sandbox.received.some((r) => JSON.stringify(r.body ?? null).includes(marker)));
    await workers!.shutdown();
    workers = null;
    // The submit finished within the stop's grace: cut short, its outcome would be unknown, and Veo cannot de-duplicate a second.
    const [row] = await f.database.db.select().from(jobs).where(eq(jobs.id, created.json.id));
    expect(row).toMatchObject({ status: 'running', providerJobId: expect.any(String) });
    workers = await startTestWorkers(['jobs'], prefix, env);
    const done = await until(created.json.id, terminal);
    expect(done).toMatchObject({ status: 'succeeded', provider: 'google' });
    // This job's own submits: once (the sandbox's count of all renders also takes an earlier test's late job).
    expect(f.sandbox.received.filter((r) => r.path.endsWith(':predictLongRunning') && JSON.stringify(r.body ?? null).includes(marker))).toHaveLength(1);
    expect(f.sandbox.videoSubmits() - before).toBeGreaterThanOrEqual(1);
    const events = (await f.api.runtime.temporal.workflow.getHandle(created.json.id).fetchHistory()).events ?? [];
    const copy = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'completeVideo');
    expect(copy!.activityTaskScheduledEventAttributes!.taskQueue!.name).toBe(downloadsQueue(taskQueue('jobs', prefix)));
    await history('succeeded-downloads-queue', created.json.id);
  });

  it('never fails over or re-sends after a submit whose outcome is unknown: one render, the job failed with its worst case charged', async () => {
    // The provider takes the render and the answer never comes (the connection's 1 s timeout cuts it).
    const hanging = await f.connect('openai', { name: 'hanging video', extra: { timeout_ms: 1000 } });
    const spare = await f.connect('openai', { name: 'spare video' });
    const slug = `video-unknown-${seq++}`;
    expect((await f.client.post('/routes', { slug, targets: [{ connection_id: hanging, model: 'sora-2' }, { connection_id: spare, model: 'sora-2' }], max_retries: 0 })).status).toBe(201);
    await f.settle();
    const submitsBefore = f.sandbox.videoSubmits();
    const created = await submit({ model: slug, prompt: `taken then silent [sandbox submit_hang render_ms=50] ${seq++}` });
    const done = await until(created.json.id, terminal, 60_000);
    // OpenAI documents no de-duplication by Idempotency-Key (issue 55): it is not asked again either.
    expect(done).toMatchObject({ status: 'failed', usage: null, error: { type: 'request_timeout' } });
    expect(f.sandbox.videoSubmits() - submitsBefore).toBe(1);
    expect(submitsOf(created.json.id).map((r) => r.headers['idempotency-key'])).toEqual([`${created.json.id}-0`]);
    expect((await ledgerOf(created.json.id))!.state).toBe('settled');
    expect((await ledgerOf(created.json.id))!.amount).toBeCloseTo(billedFor(created.json.id), 9);

    // Veo cannot de-duplicate a second submit: the job ends failed, nothing is sent elsewhere.
    const veo = await f.connect('google', { name: 'hanging veo', extra: { timeout_ms: 1000 } });
    const veoSpare = await f.connect('google', { name: 'spare veo' });
    const veoSlug = `veo-unknown-${seq++}`;
    expect((await f.client.post('/routes', { slug: veoSlug, targets: [{ connection_id: veo, model: 'veo-3.0-generate-001' }, { connection_id: veoSpare, model: 'veo-3.0-generate-001' }], max_retries: 0 })).status).toBe(201);
    await f.settle();
    const veoBefore = f.sandbox.videoSubmits();
    const veoJob = await call('POST', '/v1/videos', { model: veoSlug, prompt: `veo silent [sandbox submit_hang] ${seq++}`, duration_seconds: 8 });
    expect(veoJob.status).toBe(202);
    const failed = await until(veoJob.json.id, terminal, 60_000);
    expect(failed).toMatchObject({ status: 'failed', usage: null, error: { type: 'request_timeout' } });
    expect(f.sandbox.videoSubmits() - veoBefore).toBe(1);
    // It may be rendering (here it is): billed 8 s at $0.40, and the ledger counts that, not $0 (issue 54, item 7).
    expect(billedFor(veoJob.json.id)).toBeCloseTo(3.2, 9);
    expect(await ledgerOf(veoJob.json.id)).toMatchObject({ state: 'settled', amount: 3.2 });
  });
});
