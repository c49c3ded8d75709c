import { and, eq, sql } from 'drizzle-orm';
import { idempotencyRecords, jobs, spendLedger } from '../../core/db/schema';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { videoClient } from '../helpers/video-client';

const SCALE = 0.00003;

/**
 * `POST /v1/videos` with an Idempotency-Key when something fails after the workflow started
 * (spec 4.2 rule 3): the retry answers the job already started, never a second job and render.
 */
describe('video jobs: a retry after a failure past the start', () => {
  const prefix = uniquePrefix('videm');
  // The sandbox listens on loopback: workers may call it.
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
    jest.restoreAllMocks();
    await workers?.shutdown();
    await f.close();
  });

  const { submit, until, terminal } = videoClient(() => f, () => secret);
  const checkpointOf = async (key: string) =>
    (await f.database.db.select().from(idempotencyRecords).where(and(eq(idempotencyRecords.orgId, f.tenant.orgId), eq(idempotencyRecords.key, key))))[0];
  const jobsWithPrompt = async (prompt: string) =>
    f.database.db.select({ id: jobs.id }).from(jobs).where(sql`${jobs.request}->>'prompt' = ${prompt}`);

  it('the job row insert fails after the start: the retry answers 202 with the started job, one render', async () => {
    const key = `vidx-${Date.now()}-${seq++}`;
    const prompt = `row fails [sandbox render_ms=200] ${key}`;
    const before = f.sandbox.videoSubmits();
    const db = f.api.runtime.deps.db;
    const insert = db.insert.bind(db);
    let armed = true;
    const spy = jest.spyOn(db, 'insert').mockImplementation(((table: Parameters<typeof db.insert>[0]) => {
      if (table === jobs && armed) {
        armed = false;
        throw new Error('injected: the job row insert failed');
      }
      return insert(table);
    }) as typeof db.insert);
    const failed = await submit({ prompt }, { 'idempotency-key': key });
    spy.mockRestore();
    expect(armed).toBe(false);
    expect(failed.status).toBe(500);
    const record = await checkpointOf(key);
    expect(record).toMatchObject({ state: 'failed', checkpoint: { job_id: expect.stringMatching(/^job_/) } });
    const started = (record!.checkpoint as { job_id: string }).job_id;

    const retry = await submit({ prompt }, { 'idempotency-key': key });
    expect(retry.status).toBe(202);
    expect(retry.json).toMatchObject({ id: started, object: 'job', model: 'openai/sora-2' });
    const replay = await submit({ prompt }, { 'idempotency-key': key });
    expect([replay.status, replay.json]).toEqual([202, retry.json]);

    expect((await until(started, terminal)).status).toBe('succeeded');
    expect(await jobsWithPrompt(prompt)).toEqual([{ id: started }]);
    expect(f.sandbox.videoSubmits()).toBe(before + 1);
  });

  it('the start answers an error although the workflow started: the retry resolves to that job, one render', async () => {
    const key = `vidx-${Date.now()}-${seq++}`;
    const prompt = `start answers late [sandbox render_ms=200] ${key}`;
    const before = f.sandbox.videoSubmits();
    const workflow = f.api.runtime.temporal.workflow;
    const start = workflow.start.bind(workflow);
    const spy = jest.spyOn(workflow, 'start').mockImplementationOnce((async (...args: Parameters<typeof start>) => {
      await start(...args);
      throw new Error('injected: the answer to the start was lost');
    }) as typeof start);
    const failed = await submit({ prompt }, { 'idempotency-key': key });
    spy.mockRestore();
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const started = ((await checkpointOf(key))!.checkpoint as { job_id: string }).job_id;

    const retry = await submit({ prompt }, { 'idempotency-key': key });
    expect([retry.status, retry.json.id]).toEqual([202, started]);
    expect((await until(started, terminal)).status).toBe('succeeded');
    expect(await jobsWithPrompt(prompt)).toEqual([{ id: started }]);
    expect(f.sandbox.videoSubmits()).toBe(before + 1);
  });

  it('a start refused outright: the retry starts the checkpointed job, once', async () => {
    const key = `vidx-${Date.now()}-${seq++}`;
    const prompt = `refused first [sandbox render_ms=50] ${key}`;
    const before = f.sandbox.videoSubmits();
    const workflow = f.api.runtime.temporal.workflow;
    const spy = jest.spyOn(workflow, 'start').mockRejectedValueOnce(new Error('injected: the start was refused'));
    const failed = await submit({ prompt }, { 'idempotency-key': key });
    spy.mockRestore();
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const checkpointed = ((await checkpointOf(key))!.checkpoint as { job_id: string }).job_id;
    expect(await jobsWithPrompt(prompt)).toEqual([]);
    expect(await f.database.db.select({ state: spendLedger.state }).from(spendLedger).where(eq(spendLedger.jobId, checkpointed))).toEqual([{ state: 'released' }]);

    const retry = await submit({ prompt }, { 'idempotency-key': key });
    expect([retry.status, retry.json.id, retry.json.status]).toEqual([202, checkpointed, 'queued']);
    expect((await until(retry.json.id, terminal)).status).toBe('succeeded');
    expect(await jobsWithPrompt(prompt)).toEqual([{ id: checkpointed }]);
    expect(f.sandbox.videoSubmits()).toBe(before + 1);
    // The reservation given back when the start failed was taken again, and settled at success.
    expect(await f.database.db.select({ state: spendLedger.state }).from(spendLedger).where(eq(spendLedger.jobId, checkpointed))).toEqual([{ state: 'settled' }]);
  });
});
