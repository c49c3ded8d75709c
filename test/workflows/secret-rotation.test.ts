import { eq } from 'drizzle-orm';
import { createSealer } from '../../core/crypto/sealing';
import { webhookEndpoints } from '../../core/db/schema';
import { workflowIds } from '../../workflows/definitions';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';

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
