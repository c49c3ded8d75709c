/**
 * `npm run bench`: what the gateway adds on the chat hot path, as ratios against a bare
 * pass-through proxy measured in the same run (never absolute thresholds).
 *
 * Needs the services `npm start` runs (it reads their addresses from GW_DATA_DIR, or
 * DATABASE_URL / REDIS_URL / TEMPORAL_ADDRESS). Starts its own sandbox, a bare undici proxy in
 * front of it, and an in-process API, then sends the same chat request through each.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { createApp } from '../api/app';
import { listen } from '../api/listen';
import { startApiRuntime } from '../api/runtime';
import { loadConfig } from '../core/config';
import { newKeyring } from '../core/crypto/sealing';
import { createLogger } from '../core/logger';
import { startSandbox } from '../sandbox/server';
import { bootstrapOrganization } from '../core/tenancy/organizations';
import { readRuntimeFile } from '../scripts/lib/runtime-file';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 2000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const BODY = JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Say hello' }] });

async function bareProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const upstream = await request(`${target}/openai/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-sandbox-bench' }, body: Buffer.concat(chunks) });
    res.writeHead(upstream.statusCode, { 'content-type': 'application/json' });
    res.end(Buffer.from(await upstream.body.arrayBuffer()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) };
}

async function run(label: string, url: string, headers: Record<string, string>) {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const heapBefore = process.memoryUsage().heapUsed;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < REQUESTS) {
      next += 1;
      const t = performance.now();
      const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: BODY });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`${label}: HTTP ${res.statusCode}`);
      latencies.push(performance.now() - t);
    }
  }));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const p = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  return { label, rps: REQUESTS / seconds, p50: p(0.5), p99: p(0.99), heapMb: (process.memoryUsage().heapUsed - heapBefore) / 1e6 };
}

async function main() {
  const base = loadConfig();
  const addresses = readRuntimeFile(base.dataDir);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: base.DATABASE_URL ?? addresses?.DATABASE_URL,
    REDIS_URL: base.REDIS_URL ?? addresses?.REDIS_URL,
    TEMPORAL_ADDRESS: base.TEMPORAL_ADDRESS ?? addresses?.TEMPORAL_ADDRESS,
    GW_SEALING_KEYS: base.GW_SEALING_KEYS ?? newKeyring(),
    GW_ALLOW_PRIVATE_NETWORK: 'true',
    LOG_LEVEL: 'silent',
  });
  const sandbox = await startSandbox();
  const proxy = await bareProxy(sandbox.url);
  const runtime = await startApiRuntime(config, createLogger('silent'));
  const api = await listen(createApp(runtime.deps), 0, '127.0.0.1');
  const apiUrl = `http://127.0.0.1:${api.port}`;

  // A tenant of its own, connected to the sandbox through the management API.
  const org = await bootstrapOrganization(runtime.deps.db, { name: 'bench', plan: 'business' });
  const manage = async (path: string, body: unknown) => {
    const res = await request(`${apiUrl}/manage/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${org.management_token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return (await res.body.json()) as Record<string, string>;
  };
  await manage('/provider_connections', { kind: 'openai', name: 'bench', secret: 'sk-sandbox-bench', config: { base_url: `${sandbox.url}/openai/v1` } });
  const project = await manage('/projects', { name: 'bench' });
  const key = await manage('/gateway_keys', { label: 'bench', project_id: project.id, rate_limit_rpm: 50000 });

  const warm = Math.min(200, REQUESTS);
  for (let i = 0; i < warm; i++) await request(`${apiUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key.secret}` }, body: BODY }).then((r) => r.body.dump());

  const direct = await run('sandbox directly', `${sandbox.url}/openai/v1/chat/completions`, { authorization: 'Bearer sk-sandbox-bench' });
  const bare = await run('bare proxy', proxy.url, {});
  const gateway = await run('gateway', `${apiUrl}/v1/chat/completions`, { authorization: `Bearer ${key.secret}` });
  console.log(`${REQUESTS} requests, ${CONCURRENCY} at a time`);
  for (const r of [direct, bare, gateway]) {
    console.log(`${r.label.padEnd(18)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms`);
  }
  console.log(`gateway / bare proxy: throughput ${(gateway.rps / bare.rps).toFixed(2)}x, p50 ${(gateway.p50 / bare.p50).toFixed(2)}x, p99 ${(gateway.p99 / bare.p99).toFixed(2)}x`);
  console.log(`process rss ${(process.memoryUsage().rss / 1e6).toFixed(0)} MB`);

  await api.close();
  await runtime.close();
  await proxy.close();
  await sandbox.close();
}

main().catch((err: Error) => {
  console.error(`bench: ${err.message}`);
  process.exit(1);
});
