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

  it('is not ready while no worker polls, names what is down, and is ready once workers poll', async () => {
    const before = await fetch(`${api.url}/readyz`);
    expect(before.status).toBe(503);
    const report = (await before.json()) as { down: string[]; checks: Record<string, string> };
    expect(report.down).toEqual(['workers']);
    expect(report.checks).toMatchObject({ postgres: 'ok', redis: 'ok', temporal: 'ok' });

    const workers = await startTestWorkers(['jobs', 'webhooks', 'maintenance'], prefix);
    try {
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = (await fetch(`${api.url}/readyz`)).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 200));
      }
      expect(status).toBe(200);
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
