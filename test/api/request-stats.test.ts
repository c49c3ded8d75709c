import { requestLogs } from '../../core/db/schema';
import { newId } from '../../core/ids';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { manageClient, startManagementFixture, type ManagementFixture } from '../helpers/manage-client';
import { createTenant } from '../helpers/tenants';

type Stats = { data: Array<{ bucket_start: number; requests: number; errors: number; p50_latency_ms: number | null; p95_latency_ms: number | null; p50_added_ms: number | null; p95_added_ms: number | null }> };

/** Issue 25: the overview's hourly requests, errors and latency percentiles, from the request log. */
describe('GET /manage/v1/request_stats', () => {
  let f: ManagementFixture;
  const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;

  beforeAll(async () => {
    f = await startManagementFixture();
    // 21 requests in one hour with latencies 10, 20, ..., 210 ms; the last three failed with no
    // attempt (all of their time the gateway's); the others spent all but 1, 2 or 3 ms upstream,
    // over two attempts.
    await f.database.db.insert(requestLogs).values(Array.from({ length: 21 }, (_, i) => {
      const upstream = (i + 1) * 10 - ((i % 3) + 1);
      const attempt = (ms: number, outcome: string) => ({ connection_id: 'conn_x', provider: 'openai', model: 'gpt-4o-mini', position: 'primary', outcome, status: outcome === 'ok' ? 200 : 500, latency_ms: ms });
      return {
        id: newId('req'), orgId: f.tenant.orgId, keyId: 'key_x', projectId: f.tenant.projectId, endpoint: 'chat.completions',
        status: i >= 18 ? 502 : 200, latencyMs: (i + 1) * 10, createdAt: new Date(hour + 60_000 + i * 1000),
        attempts: i >= 18 ? [] : [attempt(Math.floor(upstream / 2), 'server_error'), attempt(upstream - Math.floor(upstream / 2), 'ok')],
      };
    }));
  });
  afterAll(() => f.close());

  it('answers each hour\'s requests, errors and p50/p95 latency, total and added, as Postgres computes them', async () => {
    const res = await f.client.get<Stats>(`/request_stats?from=${Math.floor(hour / 1000) - 3600}`);
    expect(res.status).toBe(200);
    // percentile_cont over 21 sorted values: p50 is the 11th (110 ms), p95 the 20th (0.95 × 20 = 19 places on: 200 ms).
    // Added: six each of 1, 2 and 3 ms, then 190, 200 and 210: p50 the 11th (2 ms), p95 the 20th (200 ms).
    expect(res.body.data).toEqual([{ bucket_start: hour / 1000, requests: 21, errors: 3, p50_latency_ms: 110, p95_latency_ms: 200, p50_added_ms: 2, p95_added_ms: 200 }]);
  });

  it('refuses a span over 7 days, needs analytics:read, and shows another organization nothing', async () => {
    const wide = await f.client.get<{ error: { type: string } }>(`/request_stats?from=${Math.floor(hour / 1000) - 8 * 86_400}`);
    expect([wide.status, wide.body.error.type]).toEqual([400, 'invalid_request_error']);
    const narrow = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'keys only', scopes: ['keys:read'], createdByMemberId: f.tenant.memberId });
    expect((await manageClient(f.api.url, narrow.token).get('/request_stats')).status).toBe(403);
    const other = await createTenant(f.database.db);
    expect((await manageClient(f.api.url, other.token).get<Stats>('/request_stats')).body.data).toEqual([]);
  });
});
