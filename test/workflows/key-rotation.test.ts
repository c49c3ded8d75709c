import { WorkflowNotFoundError } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { gatewayKeys } from '../../core/db/schema';
import { workflowIds } from '../../workflows/definitions';
import { randomClientAddress, startTestWorkers, uniquePrefix } from '../helpers/harness';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { saveHistory } from '../helpers/histories';

type Key = { id: string; version: number; secret: string; label: string; rotated_from_key_id: string | null; allowed_ips: string[]; rate_limit_rpm: number; expires_at: string | null; previous_key: { id: string; expires_at: string | null; revoked_at: string | null } };

/** Overlaps are scaled by GW_SCHEDULE_SCALE: 30 s of overlap lasts 3 s here. */
const SCALE = 0.1;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * POST /gateway_keys/{id}/rotate and the durable `keyRotation` workflow (spec 4.4, DESIGN 4)
 * on the Temporal dev server, with real workers, including a worker restart mid-overlap.
 */
describe('key rotation', () => {
  const prefix = uniquePrefix('keyrot');
  let fixture: ManagementFixture;
  let client: ManagementFixture['client'];
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;

  beforeAll(async () => {
    fixture = await startManagementFixture({ env: { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: String(SCALE) } });
    client = fixture.client;
    workers = await startTestWorkers(['maintenance'], prefix);
  });
  afterAll(async () => {
    await workers?.shutdown();
    await fixture.close();
  });

  const temporal = () => fixture.api.runtime.temporal;
  const gatewayStatus = async (secret: string) =>
    (await fetch(`${fixture.api.url}/v1/models`, { headers: { authorization: `Bearer ${secret}`, 'x-forwarded-for': randomClientAddress() } })).status;
  const newKey = async (extra: object = {}) => (await client.post<Key>('/gateway_keys', { label: `k${Date.now()}`, project_id: fixture.tenant.projectId, ...extra })).body;
  const row = async (id: string) => (await fixture.database.db.select().from(gatewayKeys).where(eq(gatewayKeys.id, id)))[0]!;

  it('overlap_seconds 0 revokes the old key at once and answers the new one with the same configuration', async () => {
    const old = await newKey({ allowed_ips: ['10.0.0.0/8'], rate_limit_rpm: 500, credit_limit: { amount: 10, period: 'monthly' } });
    const rotated = await client.post<Key>(`/gateway_keys/${old.id}/rotate`, { overlap_seconds: 0 });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({
      object: 'gateway_key', version: 1, label: old.label, allowed_ips: ['10.0.0.0/8'], rate_limit_rpm: 500,
      credit_limit: { amount: 10, period: 'monthly' }, rotated_from_key_id: old.id,
      previous_key: { id: old.id, expires_at: null, revoked_at: expect.any(String) },
    });
    expect(rotated.body.secret).toMatch(/^gwk_/);
    expect(rotated.body.id).not.toBe(old.id);
    // Spend limits follow the lineage.
    expect((await row(rotated.body.id)).lineageId).toBe((await row(old.id)).lineageId);
    await sleep(200);
    expect(await gatewayStatus(old.secret)).toBe(401);
    expect(await gatewayStatus(rotated.body.secret)).toBe(200);
    expect((await client.get(`/gateway_keys/${old.id}`)).status).toBe(404);
    await expect(temporal().workflow.getHandle(workflowIds.keyRotation(old.id)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  });

  it('refuses revoked, expired, already rotated keys and keys of archived projects with 409 key_not_rotatable', async () => {
    const revoked = await newKey();
    await client.delete(`/gateway_keys/${revoked.id}`, '"1"');
    expect((await client.post(`/gateway_keys/${revoked.id}/rotate`, {})).body.error?.code).toBe('key_not_rotatable');

    const expired = await newKey({ expires_at: new Date(Date.now() - 1000).toISOString() });
    const expiredAnswer = await client.post(`/gateway_keys/${expired.id}/rotate`, {});
    expect([expiredAnswer.status, expiredAnswer.body.error?.code]).toEqual([409, 'key_not_rotatable']);

    const once = await newKey();
    expect((await client.post(`/gateway_keys/${once.id}/rotate`, { overlap_seconds: 600 })).status).toBe(200);
    expect((await client.post(`/gateway_keys/${once.id}/rotate`, { overlap_seconds: 600 })).body.error?.code).toBe('key_not_rotatable');

    const project = (await client.post<{ id: string }>('/projects', { name: 'soon archived' })).body;
    const inArchived = (await client.post<Key>('/gateway_keys', { label: 'a', project_id: project.id })).body;
    await client.patch(`/projects/${project.id}`, { archived: true }, '"1"');
    expect((await client.post(`/gateway_keys/${inArchived.id}/rotate`, {})).body.error?.code).toBe('key_not_rotatable');

    expect((await client.post('/gateway_keys/key_unknown/rotate', {})).status).toBe(404);
  });

  it('bounds overlap_seconds to 0..604800, honours If-Match, and defaults to 86400 (scaled)', async () => {
    const k = await newKey();
    for (const overlap_seconds of [-1, 604_801, 1.5]) {
      const res = await client.post(`/gateway_keys/${k.id}/rotate`, { overlap_seconds });
      expect([res.status, res.body.error?.message]).toEqual([400, expect.stringContaining('overlap_seconds')]);
    }
    const stale = await client.post(`/gateway_keys/${k.id}/rotate`, {}, { 'if-match': '"4"' });
    expect([stale.status, stale.body.error?.code, stale.etag]).toEqual([409, 'version_conflict', '"1"']);
    const before = Date.now();
    const res = await client.post<Key>(`/gateway_keys/${k.id}/rotate`, {}, { 'if-match': '"1"' });
    const ends = Date.parse(res.body.previous_key.expires_at!);
    expect(ends - before).toBeGreaterThanOrEqual(86_400_000 * SCALE - 1000);
    expect(ends - before).toBeLessThanOrEqual(86_400_000 * SCALE + 5000);
    const old = await client.get<Key>(`/gateway_keys/${k.id}`);
    expect(old.body).toMatchObject({ version: 2, expires_at: res.body.previous_key.expires_at });
    const description = await temporal().workflow.getHandle(workflowIds.keyRotation(k.id)).describe();
    expect(description.status.name).toBe('RUNNING');
    expect(description.taskQueue).toBe(`${prefix}gw-maintenance`);
  });

  it('revokes the old key when the overlap ends, even with the workers restarted in between', async () => {
    const old = await newKey();
    const rotated = await client.post<Key>(`/gateway_keys/${old.id}/rotate`, { overlap_seconds: 30 });
    expect(rotated.status).toBe(200);
    expect(await gatewayStatus(old.secret)).toBe(200);
    expect(await gatewayStatus(rotated.body.secret)).toBe(200);

    await workers!.shutdown();
    workers = null;
    await sleep(30_000 * SCALE + 1000);
    // Nothing ran while every worker was down: the workflow's timer fired into an empty queue.
    expect((await row(old.id)).revokedAt).toBeNull();
    // The gateway already refuses it: its expires_at is the end of the overlap.
    expect(await gatewayStatus(old.secret)).toBe(401);

    workers = await startTestWorkers(['maintenance'], prefix);
    const result = await temporal().workflow.getHandle(workflowIds.keyRotation(old.id)).result();
    await saveHistory('key-rotation-revoked', workflowIds.keyRotation(old.id));
    expect(result).toEqual({ revoked: true });
    expect((await row(old.id)).revokedAt).not.toBeNull();
    expect((await client.get(`/gateway_keys/${old.id}`)).status).toBe(404);
    expect(await gatewayStatus(rotated.body.secret)).toBe(200);
  });
});
