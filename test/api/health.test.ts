import { queueHasPollers } from '../../api/temporal-client';
import { taskQueue } from '../../workflows/definitions';
import { startTestApi, startTestWorkers, uniquePrefix, type TestApi } from '../helpers/harness';

describe('health and readiness', () => {
  const prefix = uniquePrefix('ready');
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi({ env: { GW_TASK_QUEUE_PREFIX: prefix } });
  });
  afterAll(() => api.close());

  it('answers /healthz while the process lives', async () => {
    const res = await fetch(`${api.url}/healthz`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-gw-request-id')).toMatch(/^req_/);
  });

  it('is ready without workers or Temporal; the deep read names idle queues, is cached, and is healthy once workers poll', async () => {
    const ready = await fetch(`${api.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });

    const before = await fetch(`${api.url}/healthz/deep`);
    expect(before.status).toBe(503);
    const report = (await before.json()) as { down: string[]; checks: Record<string, string>; checked_at: number };
    expect(report.down).toEqual(['workers']);
    expect(report.checks).toMatchObject({ postgres: 'ok', redis: 'ok', temporal: 'ok', workers: 'down' });

    const workers = await startTestWorkers(['jobs', 'webhooks', 'maintenance'], prefix);
    try {
      // Cached: probes within 30 s read the same evaluation, not Temporal.
      const cached = (await (await fetch(`${api.url}/healthz/deep`)).json()) as { checked_at: number; down?: string[] };
      expect(cached).toMatchObject({ checked_at: report.checked_at, down: ['workers'] });
      // A new API process, once every queue is polled, reads healthy.
      for (const name of ['jobs', 'webhooks', 'maintenance'] as const) {
        const queue = taskQueue(name, prefix);
        for (let i = 0; i < 50 && !(await queueHasPollers(api.runtime.temporal, queue)); i++) await new Promise((r) => setTimeout(r, 200));
      }
      const fresh = await startTestApi({ env: { GW_TASK_QUEUE_PREFIX: prefix } });
      try {
        const healthy = await fetch(`${fresh.url}/healthz/deep`);
        expect([healthy.status, await healthy.json()]).toEqual([200, expect.objectContaining({ status: 'ready' })]);
      } finally {
        await fresh.close();
      }
    } finally {
      await workers.shutdown();
    }
  });

  it('is not ready when Postgres is unreachable', async () => {
    const broken = await startTestApi({ env: { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', GW_TASK_QUEUE_PREFIX: prefix } });
    try {
      const res = await fetch(`${broken.url}/readyz`);
      expect(res.status).toBe(503);
      expect(((await res.json()) as { down: string[] }).down).toContain('postgres');
    } finally {
      await broken.close();
    }
  });
});
