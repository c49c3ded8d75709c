import { startOpsServer } from '../../core/observability/metrics';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';
import { startTestApi } from '../helpers/harness';
import { until } from '../helpers/until';

/**
 * Prometheus metrics of the API (issue 36 item 2), scraped from its ops port after known
 * traffic: each counter moves by exactly what was sent, labels stay bounded, and the public port
 * serves no metrics.
 */

type Sample = { name: string; labels: Record<string, string>; value: number };

/** Prometheus's text format, read line by line (no escaping in the labels these metrics use). */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The sum of a metric's samples whose labels include these. */
const valueOf = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);

describe('Prometheus metrics on the ops port', () => {
  let f: ChatFixture;
  let ops: Awaited<ReturnType<typeof startOpsServer>>;
  let secret: string;
  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${ops.port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    return parse(await res.text());
  };

  beforeAll(async () => {
    f = await startChatFixture({ GW_OPS_PORT: '0' });
    ops = await startOpsServer(f.api.runtime.metrics!.registry, 0, '127.0.0.1');
    await f.connect('openai');
    secret = await f.key();
  });
  afterAll(async () => {
    await ops.close();
    await f.close();
  });

  it('counts requests, attempts, tokens, spend and refusals by exactly the traffic sent', async () => {
    const before = await scrape();
    const hello = [{ role: 'user', content: 'Say hello' }];
    for (let i = 0; i < 3; i++) expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello })).status).toBe(200);
    // A retry on the same connection after a 503, then served: two attempts, one failed.
    expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hi [sandbox status=503 times=1]' }] })).status).toBe(200);
    // A cent cannot hold 16,000 output tokens of gpt-4o ($10 a million).
    const broke = await f.key({ credit_limit: { amount: 0.01, period: 'monthly' } });
    const refused = await f.chat(broke, { model: 'openai/gpt-4o', max_tokens: 16_000, messages: hello });
    expect([refused.status, refused.json.error.code]).toEqual([402, 'key_budget']);
    const embedded = await f.post('/v1/embeddings', { model: 'openai/text-embedding-3-small', input: 'two words' }, { authorization: `Bearer ${secret}` });
    expect(embedded.status).toBe(200);
    // The request log's batch written before the scrape, so that its time is in it.
    await f.api.runtime.deps.gateway.requestLog.flush();
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => valueOf(after, name, labels) - valueOf(before, name, labels);

    expect(delta('gw_requests_total', { endpoint: 'chat.completions', status: '200', provider: 'openai' })).toBe(4);
    expect(delta('gw_requests_total', { endpoint: 'chat.completions', status: '402', provider: 'none' })).toBe(1);
    expect(delta('gw_requests_total', { endpoint: 'embeddings', status: '200', provider: 'openai' })).toBe(1);
    expect(delta('gw_refusals_total', { status: '402', code: 'key_budget' })).toBe(1);
    expect(delta('gw_provider_attempts_total', { provider: 'openai', outcome: 'ok' })).toBe(5);
    expect(delta('gw_provider_attempts_total', { provider: 'openai', outcome: 'server_error' })).toBe(1);
    expect(delta('gw_request_duration_seconds_count', { endpoint: 'chat.completions' })).toBe(5);
    expect(delta('gw_request_added_duration_seconds_count', { endpoint: 'chat.completions' })).toBe(5);
    // The sandbox counts words: "Say hello" is 2 input tokens, three times; the directive's message 4 (its words too).
    const chat = { gen_ai_operation_name: 'chat', gen_ai_provider_name: 'openai', gen_ai_response_model: 'gpt-4o-mini' };
    expect(delta('gen_ai_client_token_usage_count', { ...chat, gen_ai_token_type: 'input' })).toBe(4);
    expect(delta('gen_ai_client_token_usage_sum', { ...chat, gen_ai_token_type: 'input' })).toBe(3 * 2 + 4);
    expect(delta('gen_ai_client_operation_duration_seconds_count', chat)).toBe(4);
    expect(delta('gen_ai_client_token_usage_sum', { gen_ai_operation_name: 'embeddings', gen_ai_token_type: 'input' })).toBe(2);
    expect(delta('gw_spend_settled_usd_total', { provider: 'openai' })).toBeGreaterThan(0);
    // The process's own: event-loop lag and GC, as prom-client's default metrics.
    expect(after.some((s) => s.name === 'nodejs_eventloop_lag_seconds')).toBe(true);
    expect(after.some((s) => s.name === 'gw_batch_rows_dropped_total' && s.labels.writer === 'request_log')).toBe(true);
    // The batch writers' queues and batch times: the request log wrote at least this test's rows' batch.
    expect(after.some((s) => s.name === 'gw_batch_queued_rows' && s.labels.writer === 'spend_ledger')).toBe(true);
    expect(delta('gw_batch_flush_duration_seconds_count', { writer: 'request_log' })).toBeGreaterThanOrEqual(1);
    // Postgres pool and Redis clients: in use, idle, waiting; connected and commands pending.
    expect(['in_use', 'idle', 'waiting'].map((state) => after.some((s) => s.name === 'gw_postgres_pool_clients' && s.labels.state === state))).toEqual([true, true, true]);
    expect(valueOf(after, 'gw_postgres_pool_clients', { state: 'idle' }) + valueOf(after, 'gw_postgres_pool_clients', { state: 'in_use' })).toBeGreaterThan(0);
    expect(after.filter((s) => s.name === 'gw_redis_connected').map((s) => s.value)).toContain(1);
    expect(after.some((s) => s.name === 'gw_redis_pending_commands')).toBe(true);
    // No label names an organization, a key or a user.
    const labelNames = new Set(after.flatMap((s) => Object.keys(s.labels)));
    for (const forbidden of ['org', 'org_id', 'organization', 'key', 'key_id', 'user', 'user_id']) expect(labelNames.has(forbidden)).toBe(false);
  });

  it('times every API request as the OpenTelemetry HTTP conventions name it: method, route template, status', async () => {
    const before = await scrape();
    const hello = [{ role: 'user', content: 'Say hello' }];
    for (let i = 0; i < 2; i++) expect((await f.chat(secret, { model: 'openai/gpt-4o-mini', messages: hello })).status).toBe(200);
    const streamed = await f.chat(secret, { model: 'openai/gpt-4o-mini', stream: true, messages: hello });
    expect([streamed.status, streamed.text]).toEqual([200, expect.stringContaining('[DONE]')]);
    expect((await f.chat('gw_not_a_key', { model: 'openai/gpt-4o-mini', messages: hello })).status).toBe(401);
    const connection = await f.connect('openai');
    expect((await f.client.get(`/provider_connections/${connection}`)).status).toBe(200);
    expect((await fetch(`${f.api.url}/no/such/${connection}`)).status).toBe(404);
    expect((await fetch(`${f.api.url}/healthz`)).status).toBe(200);
    // Each response's close is what is observed: the scrape below comes after all of them.
    const seen = await until(async () => {
      const after = await scrape();
      const delta = (labels: Record<string, string>) => valueOf(after, 'http_server_request_duration_seconds_count', labels) - valueOf(before, 'http_server_request_duration_seconds_count', labels);
      const chat = { http_request_method: 'POST', http_route: '/v1/chat/completions' };
      const counts = [delta({ ...chat, http_response_status_code: '200' }), delta({ ...chat, http_response_status_code: '401' }), delta({ http_request_method: 'GET', http_route: '', http_response_status_code: '404' }), delta({ http_request_method: 'GET', http_route: '/healthz', http_response_status_code: '200' })];
      return counts.join() === '3,1,1,1' ? after : null;
    }, 'the requests observed', 10_000, 50);
    // The management read is labelled by its route's template; no label holds an id or a path of a request.
    expect(valueOf(seen, 'http_server_request_duration_seconds_count', { http_request_method: 'GET', http_route: '/manage/v1/:type/:id', http_response_status_code: '200' })).toBeGreaterThanOrEqual(1);
    const text = seen.filter((s) => s.name.startsWith('http_server_')).map((s) => JSON.stringify(s.labels)).join('\n');
    expect(text).not.toContain(connection);
    expect(text).not.toContain('/no/such');
    // The row-based request metrics go on alongside (the dashboard reads them).
    expect(valueOf(seen, 'gw_request_duration_seconds_count', { endpoint: 'chat.completions' })).toBeGreaterThan(0);
  });

  it('serves nothing but /metrics there, and no metrics on the public port', async () => {
    expect((await fetch(`http://127.0.0.1:${ops.port}/`)).status).toBe(404);
    expect((await fetch(`${f.api.url}/metrics`)).status).toBe(404);
  });

  it('keeps no metrics at all without an ops port', async () => {
    const api = await startTestApi();
    try {
      expect(api.runtime.metrics).toBeNull();
    } finally {
      await api.close();
    }
  });
});
