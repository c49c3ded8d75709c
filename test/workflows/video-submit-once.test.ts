import { eq, sql } from 'drizzle-orm';
import { newId } from '../../core/ids';
import { jobs, providerConnections, spendLedger } from '../../core/db/schema';
import { taskQueue } from '../../workflows/definitions';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { until as eventually } from '../helpers/until';
import { videoClient } from '../helpers/video-client';
import { startWorkerProcess } from '../helpers/worker-process';

const SCALE = 0.00003;
const VEO = 'google/veo-3.0-generate-001';

/**
 * A video submit is sent at most once to a provider that cannot de-duplicate it (issue 55,
 * item 1): the intent is recorded before the send, and an attempt that finds an intent without
 * an outcome does not send again. The sandbox counts what each provider rendered.
 */
describe('video jobs: a submit is never sent twice', () => {
  const prefix = uniquePrefix('submit1');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE), GW_ALLOW_PRIVATE_NETWORK: 'true' };
  let f: ChatFixture;
  let secret: string;
  let seq = 0;

  beforeAll(async () => {
    f = await startChatFixture(env);
    await f.connect('google', { name: 'veo' });
    await f.connect('openai', { name: 'sora' });
    secret = await f.key({ rate_limit_rpm: 50000 });
  });
  afterAll(async () => {
    await f.close();
  });

  const { call, until, terminal } = videoClient(() => f, () => secret);
  const marked = (marker: string) => f.sandbox.received.filter((r) => /predictLongRunning$|\/openai\/v1\/videos$/.test(r.path) && JSON.stringify(r.body).includes(marker));
  const ledgerOf = async (jobId: string) => (await f.database.db.select().from(spendLedger).where(eq(spendLedger.jobId, jobId)))[0]!;
  const rowOf = async (jobId: string) => (await f.database.db.select().from(jobs).where(eq(jobs.id, jobId)))[0]!;
  const billedFor = (jobId: string) => f.sandbox.bill.all().filter((l) => l.idempotencyKey?.startsWith(`${jobId}-`)).reduce((sum, l) => sum + (l.usd ?? 0), 0);

  /** A job failed for an unknown submit outcome: one render, its worst case (what the provider bills) kept charged. */
  async function expectFailedOnceCharged(jobId: string, marker: string, rendersBefore: number) {
    const done = await until(jobId, terminal, 90_000);
    expect(done).toMatchObject({ status: 'failed', usage: null, output: null, error: { type: 'request_timeout' } });
    expect(marked(marker)).toHaveLength(1);
    expect(f.sandbox.videoSubmits() - rendersBefore).toBe(1);
    const ledger = await ledgerOf(jobId);
    expect(ledger.state).toBe('settled');
    expect(ledger.amount).toBeGreaterThan(0);
    expect(ledger.amount).toBeCloseTo(billedFor(jobId), 9);
  }

  it('the worker is killed between the send and the answer: the retry does not send again (Veo)', async () => {
    const worker = await startWorkerProcess('jobs', prefix, env);
    let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
    try {
      const marker = `killed-${seq++}`;
      const rendersBefore = f.sandbox.videoSubmits();
      const created = await call('POST', '/v1/videos', { model: VEO, prompt: `${marker} [sandbox submit_hang render_ms=50]`, duration_seconds: 8 });
      expect(created.status).toBe(202);
      // The provider has the render; its answer never comes. The machine dies meanwhile.
      await eventually(async () => marked(marker).length === 1, 'the submit reaching the provider', 20_000);
      await worker.kill();
      expect((await rowOf(created.json.id)).submitIntent).toBe(`${created.json.id}-0`);
      workers = await startTestWorkers(['jobs'], prefix, env);
      await expectFailedOnceCharged(created.json.id, marker, rendersBefore);
    } finally {
      await worker.stop();
      await workers?.shutdown();
    }
  });

  describe('with a worker', () => {
    let workers: Awaited<ReturnType<typeof startTestWorkers>>;
    beforeAll(async () => {
      workers = await startTestWorkers(['jobs'], prefix, env);
    });
    afterAll(async () => {
      await workers.shutdown();
    });

    it('a start the API refused (its hold released) that reached Temporal all the same submits nothing and leaves no job (issue 55, item 7)', async () => {
      const jobId = newId('job');
      const now = new Date();
      // What the API left: the reservation released at the 503, no job row.
      await f.database.db.insert(spendLedger).values({ id: newId('spend'), orgId: f.tenant.orgId, lineageId: f.tenant.key.id, projectId: f.tenant.projectId, jobId, amount: 3.2, state: 'released', createdAt: now, updatedAt: now });
      const job = { id: jobId, orgId: f.tenant.orgId, keyId: f.tenant.key.id, lineageId: f.tenant.key.id, projectId: f.tenant.projectId, type: 'video.generation', model: VEO, routeSlug: null, request: { prompt: `abandoned-${seq++}` }, webhook: null, createdAt: now.toISOString() };
      const connections = await f.database.db.select().from(providerConnections).where(eq(providerConnections.orgId, f.tenant.orgId));
      const veo = connections.find((c) => c.kind === 'google')!;
      const submitsBefore = f.sandbox.videoSubmits();
      const result = await f.api.runtime.temporal.workflow.execute('videoJob', {
        workflowId: jobId, taskQueue: taskQueue('jobs', prefix),
        args: [{ refusedStartGraceMs: 0, jobId, orgId: f.tenant.orgId, job, candidates: [{ connectionId: veo.id, kind: 'google', upstreamModel: 'veo-3.0-generate-001', modelId: VEO, position: 'primary' }], failover: {}, maxRetries: 0, checkIntervalsMs: [10], retentionMs: 1000 }],
      });
      expect(result).toEqual({ status: 'abandoned' });
      expect(f.sandbox.videoSubmits()).toBe(submitsBefore);
      expect(await f.database.db.select().from(jobs).where(eq(jobs.id, jobId))).toEqual([]);
    });

    it('a 2xx whose body cannot be parsed: the job fails once, the submit is not sent again (Veo and OpenAI)', async () => {
      for (const model of [VEO, 'openai/sora-2']) {
        const marker = `garbled-${seq++}`;
        const rendersBefore = f.sandbox.videoSubmits();
        const created = await call('POST', '/v1/videos', { model, prompt: `${marker} [sandbox submit_garbled render_ms=50]`, duration_seconds: model === VEO ? 8 : 4 });
        expect(created.status).toBe(202);
        await expectFailedOnceCharged(created.json.id, marker, rendersBefore);
        // The customer sees the spec's type and our words, not a parser's.
        expect((await until(created.json.id, terminal)).error.message).not.toMatch(/JSON|Unexpected|position/);
      }
    });

    it('the `running` write fails after the provider accepted: the retry records that render without sending again', async () => {
      const marker = `running-write-${seq++}`;
      // A real Postgres error on the first move to running of this job, as a server shutting down
      // sends it (admin_shutdown); a sequence is not rolled back with the failed statement.
      await f.database.db.execute(sql.raw(`
        create sequence if not exists test_running_write_failures;
        create or replace function test_fail_running_write() returns trigger language plpgsql as $$
        begin
          if new.status = 'running' and old.status = 'queued' and new.request->>'prompt' like '${marker}%' and nextval('test_running_write_failures') = 1 then
            raise exception 'simulated outage while recording the render' using errcode = '57P01';
          end if;
          return new;
        end $$;
        drop trigger if exists test_fail_running_write on jobs;
        create trigger test_fail_running_write before update on jobs for each row execute function test_fail_running_write();`));
      try {
        const rendersBefore = f.sandbox.videoSubmits();
        const created = await call('POST', '/v1/videos', { model: VEO, prompt: `${marker} [sandbox render_ms=50]`, duration_seconds: 8 });
        expect(created.status).toBe(202);
        const done = await until(created.json.id, terminal, 60_000);
        expect(done).toMatchObject({ status: 'succeeded', usage: { seconds: 8 } });
        expect(marked(marker)).toHaveLength(1);
        expect(f.sandbox.videoSubmits() - rendersBefore).toBe(1);
        // The write did fail once: the trigger drew the failing value.
        const [drawn] = (await f.database.db.execute(sql.raw('select is_called from test_running_write_failures'))).rows as Loose[];
        expect(drawn!.is_called).toBe(true);
      } finally {
        await f.database.db.execute(sql.raw('drop trigger if exists test_fail_running_write on jobs; drop function if exists test_fail_running_write(); drop sequence if exists test_running_write_failures;'));
      }
    });
  });
});
