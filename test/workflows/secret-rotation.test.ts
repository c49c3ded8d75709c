import { NativeConnection, Worker } from '@temporalio/worker';
import { eq } from 'drizzle-orm';
import { createSecretRotationActivities } from '../../activities/secret-rotation';
import { systemClock } from '../../core/clock';
import { createSealer } from '../../core/crypto/sealing';
import { webhookEndpoints } from '../../core/db/schema';
import { taskQueue, workflowIds } from '../../workflows/definitions';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { saveHistory } from '../helpers/histories';
import { testDataConverter } from '../helpers/sealing-keys';
import { workflowSpanSink } from '../../workers/temporal';

type Endpoint = { id: string; version: number; secret?: string; secret_rotated_at: number | null };

/** 24 hours scaled down to about 3 seconds. */
const RETIRE_MS = 3000;
const SCALE = RETIRE_MS / 86_400_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** POST /webhook_endpoints/{id}/rotate_secret and the durable `secretRotation` workflow. */
describe('webhook secret rotation', () => {
  const prefix = uniquePrefix('whsecrot');
  let fixture: ManagementFixture;
  let client: ManagementFixture['client'];
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  const sealer = () => createSealer(process.env.GW_SEALING_KEYS!);

  beforeAll(async () => {
    fixture = await startManagementFixture({ env: { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE) } });
    client = fixture.client;
    workers = await startTestWorkers(['maintenance'], prefix);
  });
  afterAll(async () => {
    await workers?.shutdown();
    await fixture.close();
  });

  const stored = async (id: string) => (await fixture.database.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, id)))[0]!;
  const opened = (orgId: string, id: string, sealed: string) => sealer().open(sealed, { orgId, recordId: id, field: 'secret' });

  it('returns a new whsec_ secret once; the old one keeps signing until the workflow retires it, across a worker restart', async () => {
    const created = await client.post<Endpoint>('/webhook_endpoints', { url: 'https://hooks.example.com/rot' });
    const first = created.body.secret!;
    expect(first).toMatch(/^whsec_/);
    const rotated = await client.post<Endpoint>(`/webhook_endpoints/${created.body.id}/rotate_secret`, {});
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ id: created.body.id, version: 2, secret_rotated_at: expect.any(Number) });
    const second = rotated.body.secret!;
    expect(second).toMatch(/^whsec_/);
    expect(second).not.toBe(first);
    expect((await client.get<Endpoint>(`/webhook_endpoints/${created.body.id}`)).body.secret).toBeUndefined();

    const orgId = fixture.tenant.orgId;
    let row = await stored(created.body.id);
    expect(opened(orgId, row.id, row.secretSealed)).toBe(second);
    expect(row.retiredSecrets.map((s) => opened(orgId, row.id, s.sealed))).toEqual([first]);
    expect(JSON.stringify(row)).not.toContain(first.slice(6));

    await workers!.shutdown();
    workers = null;
    await sleep(RETIRE_MS + 1000);
    row = await stored(created.body.id);
    expect(row.retiredSecrets).toHaveLength(1);

    workers = await startTestWorkers(['maintenance'], prefix);
    const result = await fixture.api.runtime.temporal.workflow.getHandle(workflowIds.secretRotation(created.body.id)).result();
    expect(result).toEqual({ dropped: 1 });
    row = await stored(created.body.id);
    expect(row.retiredSecrets).toEqual([]);
    expect(opened(orgId, row.id, row.secretSealed)).toBe(second);
  });

  it('a second rotation inside the window joins the running workflow, which retires both in turn', async () => {
    const created = await client.post<Endpoint>('/webhook_endpoints', { url: 'https://hooks.example.com/twice' });
    await client.post(`/webhook_endpoints/${created.body.id}/rotate_secret`, {});
    await sleep(1000);
    const again = await client.post<Endpoint>(`/webhook_endpoints/${created.body.id}/rotate_secret`, {}, { 'if-match': '"2"' });
    expect(again.body.version).toBe(3);
    expect((await stored(created.body.id)).retiredSecrets).toHaveLength(2);
    const handle = fixture.api.runtime.temporal.workflow.getHandle(workflowIds.secretRotation(created.body.id));
    expect(await handle.result()).toEqual({ dropped: 2 });
    await saveHistory('secret-rotation-retired', workflowIds.secretRotation(created.body.id));
    expect((await stored(created.body.id)).retiredSecrets).toEqual([]);
  });

  it('is never patched, and refuses plain-HTTP and private URLs', async () => {
    const created = await client.post<Endpoint>('/webhook_endpoints', { url: 'https://hooks.example.com/p' });
    const patch = await client.patch(`/webhook_endpoints/${created.body.id}`, { description: 'x' }, '"1"');
    expect([patch.status, patch.body.error?.code]).toEqual([400, 'operation_not_supported']);
    for (const url of ['http://hooks.example.com/x', 'https://127.0.0.1/x', 'not a url']) {
      const res = await client.post('/webhook_endpoints', { url });
      expect([url, res.status, res.body.error?.type]).toEqual([url, 400, 'invalid_request_error']);
    }
    const events = await client.post('/webhook_endpoints', { url: 'https://hooks.example.com/x', events: ['job.exploded'] });
    expect(events.status).toBe(400);
    const defaults = await client.post<{ events: string[] }>('/webhook_endpoints', { url: 'https://hooks.example.com/x' });
    expect(defaults.body.events).toEqual(['job.succeeded', 'job.failed', 'job.canceled']);
  });
});

/**
 * A rotation racing the end of the previous rotation's workflow. A worker of our own wraps the
 * activity so a test can hold it after its check (which found nothing left) and before the
 * workflow sees that answer: the moment the previous design joined a workflow about to end.
 */
describe('webhook secret rotation racing the end of the previous workflow', () => {
  const prefix = uniquePrefix('whsecrace');
  let fixture: ManagementFixture;
  let client: ManagementFixture['client'];
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  /** When set, the next check of this endpoint waits for `release` after its transaction. */
  let hold: { endpointId: string; reached: () => void; release: Promise<void> } | null = null;

  beforeAll(async () => {
    fixture = await startManagementFixture({ env: { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE) } });
    client = fixture.client;
    const real = createSecretRotationActivities({ db: fixture.database.db, clock: systemClock });
    connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    worker = await Worker.create({
      connection,
      namespace: 'default',
      taskQueue: taskQueue('maintenance', prefix),
      workflowBundle: { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! },
      // The API seals the workflow's input; the worker opens it as the gateway's workers do.
      dataConverter: testDataConverter(),
      sinks: workflowSpanSink(),
      activities: {
        async dropRetiredSecrets(input: { orgId: string; endpointId: string }) {
          const result = await real.dropRetiredSecrets(input);
          const held = hold;
          if (held && held.endpointId === input.endpointId) {
            hold = null;
            held.reached();
            await held.release;
          }
          return result;
        },
      },
    });
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await connection?.close();
    await fixture.close();
  });

  const stored = async (id: string) => (await fixture.database.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, id)))[0]!;
  const rotate = async (id: string) => {
    const res = await client.post<Endpoint>(`/webhook_endpoints/${id}/rotate_secret`, {});
    expect(res.status).toBe(200);
    const retired = (await stored(id)).retiredSecrets;
    return { secret: res.body.secret!, retireAt: Date.parse(retired[0]!.expires_at), retired: retired.length };
  };

  it('a rotation while the workflow holds its last check\'s "none left" answer is still dropped after its time', async () => {
    const created = await client.post<Endpoint>('/webhook_endpoints', { url: 'https://hooks.example.com/race' });
    const id = created.body.id;
    let reached!: () => void;
    let release!: () => void;
    const atCheck = new Promise<void>((r) => (reached = r));
    hold = { endpointId: id, reached, release: new Promise<void>((r) => (release = r)) };

    await rotate(id);
    await atCheck; // the first secret is dropped, and the check answered "none left"
    expect((await stored(id)).retiredSecrets).toEqual([]);
    const second = await rotate(id); // lands before the workflow sees that answer
    expect(second.retired).toBe(1);
    release();

    const handle = fixture.api.runtime.temporal.workflow.getHandle(workflowIds.secretRotation(id));
    await sleep(Math.max(0, second.retireAt - Date.now() - 1000));
    expect((await stored(id)).retiredSecrets).toHaveLength(1); // still signing inside its window
    expect(await handle.result()).toEqual({ dropped: 2 });
    expect(Date.now()).toBeGreaterThanOrEqual(second.retireAt);
    expect((await stored(id)).retiredSecrets).toEqual([]);
  });

  it('a rotation after the previous workflow ended starts it anew, which drops the secret after its time', async () => {
    const created = await client.post<Endpoint>('/webhook_endpoints', { url: 'https://hooks.example.com/after' });
    const id = created.body.id;
    await rotate(id);
    const firstRun = fixture.api.runtime.temporal.workflow.getHandle(workflowIds.secretRotation(id));
    expect(await firstRun.result()).toEqual({ dropped: 1 });

    const second = await rotate(id);
    const handle = fixture.api.runtime.temporal.workflow.getHandle(workflowIds.secretRotation(id));
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect(await handle.result()).toEqual({ dropped: 1 });
    expect(Date.now()).toBeGreaterThanOrEqual(second.retireAt);
    expect((await stored(id)).retiredSecrets).toEqual([]);
  });

  it('rotations in quick succession around the end of the window all get dropped', async () => {
    const created = await client.post<Endpoint>('/webhook_endpoints', { url: 'https://hooks.example.com/burst' });
    const id = created.body.id;
    const first = await rotate(id);
    // Rotate again across the first secret's end, every 150 ms from 300 ms before it to 600 ms after.
    await sleep(Math.max(0, first.retireAt - Date.now() - 300));
    let last = first;
    for (let i = 0; i < 6; i++) {
      last = await rotate(id);
      await sleep(150);
    }
    const deadline = last.retireAt + 10_000;
    while ((await stored(id)).retiredSecrets.length > 0 && Date.now() < deadline) await sleep(200);
    expect((await stored(id)).retiredSecrets).toEqual([]);
    expect(Date.now()).toBeGreaterThanOrEqual(last.retireAt);
  });
});
