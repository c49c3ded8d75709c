/**
 * The ten-million-row check of issue 13 section 4: request_logs (partitioned by UTC day,
 * migration 0015) and usage_hourly filled with generate_series, then EXPLAIN (ANALYZE, BUFFERS)
 * of the reads the observability endpoints make. Writes bench/results/<date>-request-log-scale.md.
 *
 *   npm run bench:scale                     # an embedded PostgreSQL of its own
 *   DATABASE_URL=postgres://... npm run bench:scale   # a fresh database on that server
 *   BENCH_ROWS=1000000 npm run bench:scale  # fewer rows, for a quick look
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { applyMigrations } from '../core/db/migrate';
import { partitionName } from '../core/request-log/retention';
import { startEmbeddedPostgres } from '../scripts/lib/local-services';
import { freePort } from '../scripts/lib/ports';

const ROWS = Number(process.env.BENCH_ROWS ?? 10_000_000);
const DAYS = 90;
const DAY_MS = 86_400_000;
/** One organization has most of the traffic; the page and trace reads are on it. */
const ORGS = [
  { id: 'org_bench_big', share: 0.7 },
  { id: 'org_bench_b', share: 0.1 },
  { id: 'org_bench_c', share: 0.1 },
  { id: 'org_bench_d', share: 0.1 },
];
const MODELS = ['gpt-4o-mini', 'gpt-4o', 'claude-sonnet-4', 'claude-haiku-4', 'gemini-2.5-flash', 'llama-3.3-70b'];

const log = (m: string) => console.log(`[bench:scale] ${m}`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function database(work: string): Promise<{ url: string; stop(): Promise<void>; source: string }> {
  if (process.env.DATABASE_URL) {
    const name = `gw_bench_scale_${Date.now().toString(36)}`;
    const admin = new Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(process.env.DATABASE_URL);
    url.pathname = `/${name}`;
    return {
      url: url.toString(),
      source: `a fresh database on DATABASE_URL's server`,
      async stop() {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
        await admin.end();
      },
    };
  }
  log('starting an embedded PostgreSQL...');
  fs.chmodSync(work, 0o777);
  const pg = await startEmbeddedPostgres(path.join(work, 'pg'), await freePort());
  return { ...pg, source: 'embedded PostgreSQL started by the bench (package defaults: shared_buffers 128MB)' };
}

async function timed<T>(what: string, f: () => Promise<T>): Promise<[T, number]> {
  const started = Date.now();
  const result = await f();
  const ms = Date.now() - started;
  log(`${what}: ${seconds(ms)}`);
  return [result, ms];
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-scale-'));
  const db = await database(work);
  const pg = new Client({ connectionString: db.url });
  const report: string[] = [];
  try {
    await applyMigrations(db.url);
    await pg.connect();
    await pg.query(`SET maintenance_work_mem = '1GB'; SET work_mem = '64MB'; SET synchronous_commit = off`);
    const now = new Date();
    const today = Math.floor(now.getTime() / DAY_MS) * DAY_MS;
    const start = today - (DAYS - 1) * DAY_MS;

    // Day partitions for the whole window, as the retention schedule keeps them.
    for (let day = start; day < today; day += DAY_MS) {
      await pg.query(`CREATE TABLE IF NOT EXISTS "${partitionName(new Date(day))}" PARTITION OF request_logs FOR VALUES FROM ('${new Date(day).toISOString()}') TO ('${new Date(day + DAY_MS).toISOString()}')`);
    }
    for (const org of ORGS) await pg.query(`INSERT INTO organizations (id, name) VALUES ($1, $1)`, [org.id]);

    // Loading is faster with the secondary indexes built afterwards; the same definitions come back.
    const { rows: indexes } = await pg.query<{ name: string; def: string }>(
      `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       WHERE i.indrelid = 'request_logs'::regclass AND NOT i.indisprimary`);
    if (indexes.length === 0) throw new Error('no secondary indexes on request_logs: has migration 0015 run?');
    log(`dropping ${indexes.length} secondary indexes for the load: ${indexes.map((i) => i.name).join(', ')}`);
    for (const index of indexes) await pg.query(`DROP INDEX "${index.name}"`);

    const perDay = Math.ceil(ROWS / DAYS);
    const [, loadMs] = await timed(`${ROWS.toLocaleString('en')} request_logs rows over ${DAYS} days`, async () => {
      let offset = 0;
      for (let d = 0; d < DAYS; d++) {
        const dayStart = new Date(start + d * DAY_MS).toISOString();
        // Attribution is a function of g: 40 (key, user) lineages, 6 models, 10 teams, a session per 20 requests,
        // 3% 429s and 2% 500s spread by a multiplicative hash; 10% of rows keep their bodies.
        await pg.query(`
          INSERT INTO request_logs (id, org_id, key_id, project_id, endpoint, requested_model, route_slug, served_model, provider, connection_id,
            chain_position, status, error_type, error_code, stream, latency_ms, attempts, usage, cost, price_source, user_id, session_id, tags,
            request_body, response_body, created_at)
          SELECT 'req_' || md5(g::text),
            CASE WHEN g % 10 < 7 THEN 'org_bench_big' WHEN g % 10 = 7 THEN 'org_bench_b' WHEN g % 10 = 8 THEN 'org_bench_c' ELSE 'org_bench_d' END,
            'key_' || (g % 40 % 10), 'proj_' || (g % 40 % 3), 'chat.completions',
            m.model, CASE WHEN g % 7 = 0 THEN 'fast-chat' END, m.model, m.provider, 'conn_' || m.provider, '0',
            s.status, CASE WHEN s.status <> 200 THEN 'upstream_error' END, NULL, g % 5 = 0, 100 + (g * 37) % 2000,
            '[]'::jsonb, jsonb_build_object('prompt_tokens', 50 + g % 500, 'completion_tokens', 20 + g % 300, 'total_tokens', 70 + g % 500 + g % 300),
            (70 + g % 800) * 0.0000005, 'catalog', 'user_' || (g % 40), 'sess_' || (g / 20), jsonb_build_object('team', 'team_' || (g % 10)),
            CASE WHEN g % 10 = 3 THEN jsonb_build_object('messages', jsonb_build_array(jsonb_build_object('role', 'user', 'content', repeat('hello ', 20)))) END,
            CASE WHEN g % 10 = 3 THEN jsonb_build_object('choices', jsonb_build_array(jsonb_build_object('message', jsonb_build_object('content', repeat('answer ', 30))))) END,
            $1::timestamptz + ((g - $2) * (86400.0 / $3)) * interval '1 second'
          FROM generate_series($2::bigint, $2::bigint + $3 - 1) g
          CROSS JOIN LATERAL (SELECT (ARRAY[${MODELS.map((x) => `'${x}'`).join(',')}])[1 + g % 6] AS model,
                                     (ARRAY['openai','openai','anthropic','anthropic','google','groq'])[1 + g % 6] AS provider) m
          CROSS JOIN LATERAL (SELECT CASE WHEN (g * 7919) % 100 < 3 THEN 429 WHEN (g * 7919) % 100 < 5 THEN 500 ELSE 200 END AS status) s`,
        [dayStart, offset, perDay]);
        offset += perDay;
        if (d % 10 === 9) log(`  ${d + 1} days loaded`);
      }
    });
    const [, indexMs] = await timed('secondary indexes', async () => {
      // pg_get_indexdef says ON ONLY for a partitioned index, which would skip the partitions.
      for (const index of indexes) await pg.query(index.def.replace(' ON ONLY ', ' ON '));
    });
    const [, rollupMs] = await timed('usage_hourly from the raw rows', () => pg.query(`
      INSERT INTO usage_hourly (org_id, hour, key_id, project_id, model, provider, user_id, tags, requests, prompt_tokens, completion_tokens, total_tokens, cost, unpriced_requests)
      SELECT org_id, date_trunc('hour', created_at), key_id, project_id, coalesce(requested_model, ''), coalesce(provider, ''), coalesce(user_id, ''), tags,
        count(*), sum((usage->>'prompt_tokens')::bigint), sum((usage->>'completion_tokens')::bigint), sum((usage->>'total_tokens')::bigint), sum(coalesce(cost, 0)), count(*) FILTER (WHERE cost IS NULL)
      FROM request_logs GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`));
    const [, analyzeMs] = await timed('VACUUM ANALYZE', async () => { await pg.query('VACUUM ANALYZE request_logs'); await pg.query('VACUUM ANALYZE usage_hourly'); });

    const { rows: [sizes] } = await pg.query<Record<string, string>>(`
      SELECT (SELECT count(*) FROM request_logs)::text AS request_logs_rows,
             (SELECT count(*) FROM usage_hourly)::text AS usage_hourly_rows,
             (SELECT count(*) FROM pg_inherits WHERE inhparent = 'request_logs'::regclass)::text AS partitions,
             pg_size_pretty((SELECT sum(pg_table_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'request_logs'::regclass)) AS request_logs_table,
             pg_size_pretty((SELECT sum(pg_indexes_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'request_logs'::regclass)) AS request_logs_indexes,
             pg_size_pretty(pg_total_relation_size('usage_hourly')) AS usage_hourly_total,
             current_setting('server_version') AS server_version, current_setting('shared_buffers') AS shared_buffers`);

    const from = new Date(now.getTime() - 30 * DAY_MS).toISOString();
    const to = now.toISOString();
    const pageWhere = `org_id = 'org_bench_big' AND requested_model = 'gpt-4o-mini' AND status BETWEEN 400 AND 499 AND created_at >= '${from}' AND created_at < '${to}'`;
    const { rows: firstPage } = await pg.query<{ id: string; created_at: Date }>(`SELECT id, created_at FROM request_logs WHERE ${pageWhere} ORDER BY created_at DESC, id DESC LIMIT 21`);
    // The cursor of a next page: the 20th row of the first.
    const cursor = firstPage[19]!;
    const { rows: [session] } = await pg.query<{ session_id: string }>(`SELECT session_id FROM request_logs WHERE org_id = 'org_bench_big' AND created_at >= '${new Date(today - 45 * DAY_MS).toISOString()}' ORDER BY created_at LIMIT 1`);
    const { rows: [one] } = await pg.query<{ id: string }>(`SELECT id FROM request_logs WHERE org_id = 'org_bench_big' AND created_at >= '${new Date(today - 60 * DAY_MS).toISOString()}' ORDER BY created_at LIMIT 1`);
    const cols = 'id, created_at, requested_model, provider, status, latency_ms, cost, user_id, session_id';
    const history = new Date(now.getTime() - 90 * DAY_MS).toISOString();

    const queries: Array<{ name: string; sql: string }> = [
      { name: 'Filtered first page: org + model + status 4xx + 30 days, newest first, limit 20 (+1)', sql: `SELECT ${cols} FROM request_logs WHERE ${pageWhere} ORDER BY created_at DESC, id DESC LIMIT 21` },
      { name: 'Next page by keyset cursor (created_at, id) of the 20th row', sql: `SELECT ${cols} FROM request_logs WHERE ${pageWhere} AND (created_at, id) < ('${cursor.created_at.toISOString()}', '${cursor.id}') ORDER BY created_at DESC, id DESC LIMIT 21` },
      { name: 'Unfiltered first page: org + 30 days', sql: `SELECT ${cols} FROM request_logs WHERE org_id = 'org_bench_big' AND created_at >= '${from}' AND created_at < '${to}' ORDER BY created_at DESC, id DESC LIMIT 21` },
      { name: 'Tag filter first page: org + tags @> {"team":"team_3"} + 30 days', sql: `SELECT ${cols} FROM request_logs WHERE org_id = 'org_bench_big' AND tags @> '{"team":"team_3"}' AND created_at >= '${from}' AND created_at < '${to}' ORDER BY created_at DESC, id DESC LIMIT 21` },
      { name: 'Session trace: every request of one session_id within the 90-day window, in order', sql: `SELECT ${cols}, usage FROM request_logs WHERE org_id = 'org_bench_big' AND session_id = '${session!.session_id}' AND created_at >= '${history}' ORDER BY created_at, id` },
      { name: 'One request by id (no time in the id: every day partition is probed)', sql: `SELECT * FROM request_logs WHERE org_id = 'org_bench_big' AND id = '${one!.id}' AND created_at >= '${history}'` },
      { name: 'A month of usage from usage_hourly, by day and model', sql: `SELECT date_trunc('day', hour) AS day, model, sum(requests) AS requests, sum(total_tokens) AS tokens, sum(cost) AS cost, sum(unpriced_requests) AS unpriced FROM usage_hourly WHERE org_id = 'org_bench_big' AND hour >= '${from}' AND hour < '${to}' GROUP BY 1, 2 ORDER BY 1, 2` },
    ];

    const results: Array<{ name: string; first: number; warm: number; rows: number; plan: string }> = [];
    for (const q of queries) {
      const explain = async () => {
        const { rows } = await pg.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${q.sql}`);
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        const exec = Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN);
        const planning = Number(/Planning Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN);
        return { plan, total: exec + planning };
      };
      const first = await explain();
      let warm = first;
      for (let i = 0; i < 4; i++) {
        const again = await explain();
        if (again.total < warm.total || warm === first) warm = again;
      }
      const { rowCount } = await pg.query(q.sql);
      results.push({ name: q.name, first: first.total, warm: warm.total, rows: rowCount ?? 0, plan: warm.plan });
      log(`${q.name}: first ${first.total.toFixed(2)} ms, best of 4 after ${warm.total.toFixed(2)} ms, ${rowCount} rows`);
    }

    const date = now.toISOString().slice(0, 10);
    report.push(
      `# Request log at ten million rows (${date})`,
      '',
      'Issue 13 section 4: `request_logs` partitioned by UTC day (migration 0015), reads served by its indexes, usage from `usage_hourly`.',
      `Produced by \`npm run bench:scale\` (bench/request-log-scale.ts) on ${os.cpus().length} CPUs, ${Math.round(os.totalmem() / 2 ** 30)} GB; ${db.source}.`,
      '',
      '## Data',
      '',
      `- ${Number(sizes!.request_logs_rows).toLocaleString('en')} request_logs rows over ${DAYS} days (${perDay.toLocaleString('en')} a day) in ${sizes!.partitions} partitions (one a UTC day, the days made ahead, the default); table ${sizes!.request_logs_table}, indexes ${sizes!.request_logs_indexes}.`,
      `- 4 organizations (70% / 10% / 10% / 10%); reads are on the 70% one (about ${Math.round((ROWS * 0.7) / DAYS).toLocaleString('en')} rows a day, ${Math.round((ROWS * 0.7 * 30) / DAYS).toLocaleString('en')} in 30 days).`,
      `- 6 models, 40 key/user lineages, 10 tag values, a session per 20 requests, 3% 429 and 2% 500, bodies on 10% of rows.`,
      `- ${Number(sizes!.usage_hourly_rows).toLocaleString('en')} usage_hourly rows (${sizes!.usage_hourly_total}), aggregated from the raw rows.`,
      `- PostgreSQL ${sizes!.server_version}, shared_buffers ${sizes!.shared_buffers}.`,
      `- Load ${seconds(loadMs)} (secondary indexes dropped), index build ${seconds(indexMs)}, rollup ${seconds(rollupMs)}, VACUUM ANALYZE ${seconds(analyzeMs)}.`,
      '',
      '## Reads',
      '',
      'Planning plus execution time from EXPLAIN (ANALYZE, BUFFERS): the first run, and the best of four runs after it.',
      '',
      '| read | rows | first (ms) | warm (ms) |',
      '|---|---:|---:|---:|',
      ...results.map((r) => `| ${r.name} | ${r.rows} | ${r.first.toFixed(2)} | ${r.warm.toFixed(2)} |`),
      '',
      '## Plans (warm run)',
      '',
      ...results.flatMap((r) => [`### ${r.name}`, '', '```', r.plan, '```', '']),
    );
    const out = path.resolve(__dirname, 'results', `${date}-request-log-scale.md`);
    fs.writeFileSync(out, report.join('\n'));
    log(`wrote ${out}`);
  } finally {
    await pg.end().catch(() => undefined);
    await db.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
