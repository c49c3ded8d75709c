/**
 * The gateway as a bench runs it: the mock upstream, the API started as production starts it,
 * and organizations set up through the management API with keys as production issues them.
 * See bench/README.md ("What runs").
 */
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import * as esbuild from 'esbuild';
import { connectDatabase } from '../../core/db/client';
import { bootstrapOrganization } from '../../core/tenancy/organizations';
import { freePort } from '../../scripts/lib/ports';
import { builtEntry, node, productionNodeFlags, ROOT, waitForPort, type Tree } from './processes';
import type { Services } from './services';

/** Keys per gateway subject, used in turn, so the 50 000 rpm tier of one key is not what is measured. */
export const KEYS_PER_SUBJECT = 8;

/** The model a subject names to reach the mock through the chat completions wire of a compatible kind. */
export const BENCH_CHAT_WIRE_MODEL = 'bench-chat-wire';

/** The chat request every load run sends. */
export const chatBody = (model: string, stream = false) =>
  JSON.stringify({ model, messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Write two sentences about foxes.' }], ...(stream && { stream: true }) });

/** The same request in Anthropic's Messages API (`/v1/messages`, issue 35). */
export const messagesBody = (model: string, stream = false) =>
  JSON.stringify({ model, max_tokens: 1024, system: 'You are a helpful assistant.', messages: [{ role: 'user', content: 'Write two sentences about foxes.' }], ...(stream && { stream: true }) });

/** The same request in OpenAI's Responses API (`/v1/responses`, issue 35). */
export const responsesBody = (model: string, stream = false) =>
  JSON.stringify({ model, instructions: 'You are a helpful assistant.', input: 'Write two sentences about foxes.', ...(stream && { stream: true }) });

/** bench/mock-upstream.ts in its own process; answers its URL. */
export async function startMock(work: string): Promise<string> {
  const mockPort = await freePort();
  const mockLog = path.join(work, 'mock.log');
  const mock = node(['--import', 'tsx', 'bench/mock-upstream.ts', String(mockPort)], { NODE_ENV: 'production' }, mockLog);
  await waitForPort('the mock upstream', mockPort, mock, mockLog);
  return `http://127.0.0.1:${mockPort}`;
}

/** The environment of the API (and of a worker beside it) as production sets it, on the bench's services. */
export function gatewayEnv(work: string, id: string, svc: Services, sealingKeys: string): Record<string, string> {
  return {
    NODE_ENV: 'production',
    GW_SEALING_KEYS: sealingKeys,
    GW_SCHEDULE_SCALE: '1',
    GW_ALLOW_PRIVATE_NETWORK: 'true',
    GW_DATA_DIR: path.join(work, `data-${id}`),
    DATABASE_URL: svc.databaseUrl,
    REDIS_URL: svc.redisUrl,
    TEMPORAL_ADDRESS: svc.temporalAddress,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  };
}

export type StartedApi = { child: ChildProcess; pid: number; apiUrl: string; logFile: string };

/**
 * A TypeScript module to preload into the API (the CPU profiler), compiled to one CommonJS file
 * in the work folder: the API runs with plain node, without tsx's loader.
 */
function compiledPreload(work: string, file: string): string {
  const outfile = path.join(work, `${path.basename(file, '.ts')}.cjs`);
  esbuild.buildSync({ absWorkingDir: ROOT, entryPoints: [file], outfile, bundle: true, platform: 'node', format: 'cjs', target: 'node24', logLevel: 'error' });
  return outfile;
}

/**
 * The API as `npm run api` starts it: dist/api/server.js with plain node, built first when
 * dist/ is missing or out of date (`npm run api` runs it through scripts/run-built.cjs in the
 * same process; the pid measured here is the API's own either way). `preload` adds TypeScript
 * modules required first (the CPU profiler).
 */
export async function startApi(work: string, id: string, label: string, svc: Services, sealingKeys: string, options: { preload?: string[]; env?: Record<string, string | undefined>; tree?: Tree } = {}): Promise<StartedApi> {
  const port = await freePort();
  const logFile = path.join(work, `${id}.log`);
  const preloads = (options.preload ?? []).flatMap((p) => ['--require', compiledPreload(work, p)]);
  // `env` adds to production's settings, or overrides them (bench:jobs compresses the schedule).
  // The flags `npm run api` starts it with (the young generation's size), then
  // BENCH_API_NODE_ARGS: extra node flags for this tree's API subjects (e.g. --trace-gc), for
  // experiments; a later flag wins. A baseline's (BENCH_BASELINE) get BENCH_BASELINE_NODE_ARGS instead.
  const extra = (options.tree ? process.env.BENCH_BASELINE_NODE_ARGS : process.env.BENCH_API_NODE_ARGS)?.split(' ').filter(Boolean) ?? [];
  const nodeArgs = [...productionNodeFlags(options.tree), ...extra];
  const child = node([...nodeArgs, ...preloads, builtEntry('api/server', options.tree)], {
    ...gatewayEnv(work, id, svc, sealingKeys),
    ...options.env,
    PORT: String(port),
    HOST: '127.0.0.1',
  }, logFile, options.tree);
  await waitForPort(`the API (${label})`, port, child, logFile);
  return { child, pid: child.pid!, apiUrl: `http://127.0.0.1:${port}`, logFile };
}

/** A new organization in Postgres, as `npm start`'s first run makes one: its id and management token. */
export async function newOrganization(svc: Services, name: string): Promise<{ orgId: string; token: string }> {
  const database = connectDatabase(svc.databaseUrl, { max: 1 });
  const org = await bootstrapOrganization(database.db, { name, plan: 'business' }).finally(() => database.close());
  return { orgId: org.org_id, token: org.management_token };
}

/** One management API call; the answer with its ETag. */
export async function manage(apiUrl: string, token: string, method: string, p: string, body?: unknown, ifMatch?: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${apiUrl}/manage/v1${p}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(ifMatch && { 'if-match': ifMatch }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${method} ${p} answered ${res.status}: ${JSON.stringify(answer)}`);
  return { ...answer, etag: res.headers.get('etag') };
}

/**
 * A project and `count` keys of it with the 50 000 rpm tier and a 1 000 000 USD monthly credit
 * limit; with BENCH_KEY_LIMIT=none, no limit (a key without a blocking limit draws nothing from a
 * lease and keeps a pending ledger row while its call runs: what that costs).
 */
export async function benchKeys(apiUrl: string, token: string, count: number): Promise<string[]> {
  const limited = process.env.BENCH_KEY_LIMIT !== 'none';
  const project = await manage(apiUrl, token, 'POST', '/projects', { name: 'bench' });
  const keys: string[] = [];
  for (let i = 0; i < count; i++) {
    const key = await manage(apiUrl, token, 'POST', '/gateway_keys', {
      label: `bench ${i}`,
      project_id: project.id,
      rate_limit_rpm: 50000,
      ...(limited && { credit_limit: { amount: 1_000_000, period: 'monthly' } }),
    });
    keys.push(key.secret as string);
  }
  return keys;
}

/**
 * What an organization turns on besides the defaults: prompt logging; the response cache (every
 * load request is the same question, so after the first one each is a hit); a guardrail policy.
 */
export type TenantFeatures = { promptLogging: boolean; responseCache?: boolean; guardrails?: boolean; costRules?: boolean };

/**
 * Cost attribution's worst case (issue 23): ten rules that never match tried before one that
 * matches every request and splits it three ways, so every request-log row is matched and split.
 */
async function benchCostRules(apiUrl: string, token: string): Promise<void> {
  const centers: string[] = [];
  for (const code of ['search', 'ads', 'platform']) centers.push((await manage(apiUrl, token, 'POST', '/cost_centers', { name: code, code })).id as string);
  for (let i = 0; i < 10; i++) await manage(apiUrl, token, 'POST', '/cost_center_rules', { match: { tags: { team: `nobody-${i}*` } }, priority: i, cost_center_id: centers[0] });
  await manage(apiUrl, token, 'POST', '/cost_center_rules', {
    match: {}, priority: 100,
    allocation: [{ cost_center_id: centers[0], percent: 33.33 }, { cost_center_id: centers[1], percent: 33.33 }, { cost_center_id: centers[2], percent: 33.34 }],
  });
}

/** Every input and output detector a policy can run, flagging (nothing in the bench text matches). */
export const BENCH_GUARDRAIL_POLICY = {
  target: 'organization',
  enabled: true,
  on_engine_error: 'allow',
  rules: [
    ...['email', 'phone', 'credit_card', 'iban', 'secret', 'prompt_injection'].map((detector) => ({ detector, stage: 'both', action: 'flag' })),
    { detector: 'keywords', stage: 'both', action: 'flag', words: ['project falcon', 'internal only'] },
  ],
};

/** An organization connected to the mock with a custom price and keys as production issues them. */
export async function tenant(apiUrl: string, token: string, mockUrl: string, features: TenantFeatures): Promise<string[]> {
  await manage(apiUrl, token, 'POST', '/provider_connections', { kind: 'openai', name: 'mock upstream', secret: 'sk-mock-bench', config: { base_url: `${mockUrl}/v1` }, validate: true });
  // The 20 ms mode is another base URL: a connection of its own, reached by the model name it maps.
  await manage(apiUrl, token, 'POST', '/provider_connections', { kind: 'custom', name: 'mock upstream, 20 ms', secret: 'sk-mock-bench', config: { base_url: `${mockUrl}/delay20/v1` }, model_map: { 'bench-delay20': 'gpt-4o-mini' }, validate: true });
  // The chat completions wire under another kind: a Responses request reaches it translated
  // (an `openai` connection takes Responses requests as they came, to its own /responses).
  await manage(apiUrl, token, 'POST', '/provider_connections', { kind: 'custom', name: 'mock upstream, chat wire', secret: 'sk-mock-bench', config: { base_url: `${mockUrl}/v1` }, model_map: { [BENCH_CHAT_WIRE_MODEL]: 'gpt-4o-mini' }, validate: true });
  for (const [model, provider] of [['gpt-4o-mini', 'openai'], ['gpt-4o-mini', 'custom'], ['bench-delay20', 'custom'], [BENCH_CHAT_WIRE_MODEL, 'custom']]) {
    await manage(apiUrl, token, 'POST', '/model_prices', { model, provider, input_per_million: 0.15, output_per_million: 0.6 });
  }
  const settings = await manage(apiUrl, token, 'GET', '/org_settings');
  await manage(apiUrl, token, 'PATCH', '/org_settings', {
    prompt_logging_enabled: features.promptLogging,
    ...(features.responseCache && { response_cache: { enabled: true, default_ttl_seconds: 3600 } }),
  }, settings.etag as string);
  if (features.guardrails) await manage(apiUrl, token, 'POST', '/guardrail_policies', BENCH_GUARDRAIL_POLICY);
  if (features.costRules) await benchCostRules(apiUrl, token);
  return benchKeys(apiUrl, token, KEYS_PER_SUBJECT);
}

/** The `gateway` (or prompt-log) subject: an API process and its organization's keys on the mock. */
export async function startGatewaySubject(work: string, id: string, label: string, svc: Services, sealingKeys: string, mockUrl: string, features: TenantFeatures, options: Parameters<typeof startApi>[5] = {}): Promise<StartedApi & { keys: string[]; orgId: string; token: string }> {
  const api = await startApi(work, id, label, svc, sealingKeys, options);
  const org = await newOrganization(svc, `bench ${label} ${new Date().toISOString()}`);
  const keys = await tenant(api.apiUrl, org.token, mockUrl, features);
  return { ...api, ...org, keys };
}
