import { sql } from 'drizzle-orm';
import { Client, Connection } from '@temporalio/client';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { uniquePrefix } from '../helpers/harness';
import { testDataConverter } from '../helpers/sealing-keys';
import { videoClient } from '../helpers/video-client';
import { startWorkerProcess, type WorkerProcess } from '../helpers/worker-process';

/**
 * An activity's failure text stays ours (issue 55, item 4): a failed query's message carries its
 * statement and every bound value (a job's prompt), which reached Temporal's history in plain
 * text and the customer's `job.error.message`. Failures are now sealed with the payloads, and a
 * database error is its SQLSTATE only.
 */
describe('failure messages do not leak', () => {
  const prefix = uniquePrefix('leak');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.00003', GW_ALLOW_PRIVATE_NETWORK: 'true' };
  /** Only the worker's connections fail: the API writes the same row without trouble. */
  const WORKER_APP = `gw-leak-${process.pid}`;
  let f: ChatFixture;
  let worker: WorkerProcess;
  let connection: Connection;

  beforeAll(async () => {
    f = await startChatFixture(env);
    await f.connect('openai', { name: 'videos' });
    const url = new URL(process.env.DATABASE_URL!);
    url.searchParams.set('application_name', WORKER_APP);
    worker = await startWorkerProcess('jobs', prefix, { ...env, DATABASE_URL: url.toString() });
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  });
  afterAll(async () => {
    await f.database.db.execute(sql.raw('drop trigger if exists test_refuse_job_record on jobs; drop function if exists test_refuse_job_record();'));
    await worker?.stop();
    await connection?.close();
    await f.close();
  });

  it('a failing recordJob: the job\'s error and Temporal\'s history carry neither the prompt nor the statement', async () => {
    const marker = `secret-prompt-${Date.now()}`;
    // Postgres's own message quotes the prompt, and drizzle's adds the statement and its values.
    await f.database.db.execute(sql.raw(`
      create or replace function test_refuse_job_record() returns trigger language plpgsql as $$
      begin
        if current_setting('application_name') = '${WORKER_APP}' and new.request->>'prompt' like '${marker}%' then
          raise exception 'refusing the job of %', new.request->>'prompt';
        end if;
        return new;
      end $$;
      drop trigger if exists test_refuse_job_record on jobs;
      create trigger test_refuse_job_record before insert on jobs for each row execute function test_refuse_job_record();`));
    const secret = await f.key({ rate_limit_rpm: 50000 });
    const { submit, until, terminal } = videoClient(() => f, () => secret);
    const created = await submit({ prompt: `${marker} [sandbox render_ms=50]` });
    expect(created.status).toBe(202);
    const done = await until(created.json.id, terminal, 60_000);
    expect(done).toMatchObject({ status: 'failed', error: { type: 'internal_error', code: null } });
    expect(done.error.message).not.toContain(marker);
    expect(done.error.message).not.toMatch(/insert into|Failed query|params|refusing/i);

    // Read raw, as the Temporal UI or its database shows it to someone without the codec.
    const raw = new Client({ connection });
    const history = await raw.workflow.getHandle(created.json.id).fetchHistory();
    const text = JSON.stringify(history);
    expect(text).not.toContain(marker);
    expect(text).not.toMatch(/insert into|Failed query/i);
    const failed = history.events!.find((e) => e.activityTaskFailedEventAttributes)!;
    expect(failed.activityTaskFailedEventAttributes!.failure!.message).toBe('Encoded failure');
    // The gateway's codec opens it: the SQLSTATE, nothing more.
    const [opened] = await testDataConverter().payloadCodecs[0]!.decode([failed.activityTaskFailedEventAttributes!.failure!.encodedAttributes!]);
    expect(JSON.parse(Buffer.from(opened!.data!).toString('utf8'))).toMatchObject({ message: 'a database statement failed (SQLSTATE P0001)' });
  });
});
