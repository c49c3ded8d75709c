import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { cliClient } from '../helpers/cli-clients';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';

/**
 * The Codex CLI (`@openai/codex`, `codex exec`, headless) configured with only the gateway's base
 * URL and a key (issue 53): a `model_providers` entry with `wire_api = "responses"`. Codex sends
 * what the Responses API takes today (function tools, a `namespace` tool and `web_search`,
 * `developer` input, `include`, `prompt_cache_key`, `client_metadata`): an OpenAI connection is
 * sent it as it came, an Anthropic one the translation (what it cannot carry named).
 */
const CODEX_VERSION = '0.171.0';

/** What went between Codex and the gateway: each request's method, path, status and dropped parameters. */
type Exchange = { method: string; path: string; status: number; dropped: string | null };

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A pass-through proxy in front of the gateway that records each exchange (streams relayed as they come). */
async function recordingProxy(target: string): Promise<{ url: string; exchanges: Exchange[]; close(): void }> {
  const exchanges: Exchange[] = [];
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const out = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } }, (answer) => {
      exchanges.push({ method: req.method!, path: req.url!, status: answer.statusCode!, dropped: (answer.headers['x-gw-params-dropped'] as string | undefined) ?? null });
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  const url = await listen(server);
  return { url, exchanges, close: () => { server.closeAllConnections(); server.close(); } };
}

/**
 * The proxy Codex is given for everything else it might reach for (update checks, plugins,
 * telemetry): it refuses and records. Nothing should leave the machine.
 */
async function refusingProxy(): Promise<{ url: string; attempts: string[]; close(): void }> {
  const attempts: string[] = [];
  const server = http.createServer((req, res) => {
    attempts.push(`${req.method} ${req.url}`);
    res.writeHead(502).end();
  });
  server.on('connect', (req, socket) => {
    attempts.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
  });
  const url = await listen(server);
  return { url, attempts, close: () => { server.closeAllConnections(); server.close(); } };
}

/**
 * Codex's configuration: the gateway as a model provider (base URL, key from an environment
 * variable, the Responses wire) and what keeps a headless run to itself: no update check, no
 * analytics, feedback or OpenTelemetry export, no plugin sync (it fetches from GitHub), no
 * retries (a refusal shows at once), never asking for approval, a read-only sandbox. Codex runs
 * with `--strict-config`, so a key it does not read fails the run instead of being ignored.
 */
function codexConfig(baseUrl: string, model: string): string {
  return `model = "${model}"
model_provider = "gateway"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.gateway]
name = "Model gateway"
base_url = "${baseUrl}/v1"
env_key = "GW_CODEX_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"

[features]
plugins = false
`;
}

type Run = { code: number | null; stdout: string; stderr: string; exchanges: Exchange[]; outside: string[] };

const WIRES = [
  { kind: 'openai', model: 'openai/o3-mini', upstream: '/openai/v1/responses' },
  { kind: 'anthropic', model: 'anthropic/claude-3-5-haiku-latest', upstream: '/anthropic/v1/messages' },
] as const;

describe.each(WIRES)('Codex CLI through the gateway to $kind', ({ kind, model, upstream }) => {
  let fixture: ChatFixture;
  let binary: string;
  let secret: string;

  beforeAll(async () => {
    binary = cliClient('@openai/codex', CODEX_VERSION, 'codex');
    fixture = await startChatFixture();
    await fixture.connect(kind);
    secret = await fixture.key();
  });
  afterAll(() => fixture.close());

  /** `codex exec <prompt>` in an empty folder, with a home of its own and nothing of this machine's environment but PATH. */
  async function codexExec(prompt: string): Promise<Run> {
    const gateway = await recordingProxy(fixture.api.url);
    const outside = await refusingProxy();
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-codex-home-'));
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-codex-work-'));
    try {
      fs.writeFileSync(path.join(home, 'config.toml'), codexConfig(gateway.url, model));
      const env = {
        PATH: process.env.PATH!, HOME: home, CODEX_HOME: home, GW_CODEX_KEY: secret,
        HTTPS_PROXY: outside.url, HTTP_PROXY: outside.url, ALL_PROXY: outside.url, NO_PROXY: '127.0.0.1,localhost',
      };
      const args = ['exec', '--strict-config', '--skip-git-repo-check', '--color', 'never', prompt];
      const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(binary, args, { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 45_000 });
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.on('error', reject);
        child.on('close', (exit) => resolve({ code: exit, stdout: out, stderr: err }));
      });
      return { code, stdout, stderr, exchanges: gateway.exchanges, outside: outside.attempts };
    } finally {
      gateway.close();
      outside.close();
      fs.rmSync(home, { recursive: true, force: true });
      fs.rmSync(work, { recursive: true, force: true });
    }
  }

  /** Codex finished, every request it sent was answered 200, it reached nothing else, and the gateway sent each on. */
  function expectServed(run: Run, before: number): Loose[] {
    expect({ code: run.code, stderr: run.code === 0 ? '' : run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(run.exchanges.length).toBeGreaterThan(0);
    expect(run.exchanges.filter((e) => e.status !== 200)).toEqual([]);
    expect(run.outside).toEqual([]);
    const sent = fixture.sandbox.received.slice(before);
    expect(sent.map((r) => r.path)).toEqual(run.exchanges.filter((e) => e.path === '/v1/responses').map(() => upstream));
    return sent.map((r) => r.body as Loose);
  }

  it('answers a prompt', async () => {
    const before = fixture.sandbox.received.length;
    // The sandbox model answers in text though Codex offers its tools.
    const run = await codexExec('Say hello [sandbox tool=none]');
    const [sent] = expectServed(run, before);
    expect(run.stdout.trim()).toBe(`Hello from the sandbox model ${model.split('/')[1]}.`);
    const responses = run.exchanges.find((e) => e.path === '/v1/responses')!;
    if (kind === 'openai') {
      // As it came: Codex's tools of every type, developer input, and its own fields.
      expect(sent!.tools.map((t: Loose) => t.type)).toEqual(expect.arrayContaining(['function', 'namespace', 'web_search']));
      expect(sent!.input[0]).toMatchObject({ type: 'message', role: 'developer' });
      expect(sent).toMatchObject({ include: ['reasoning.encrypted_content'], prompt_cache_key: expect.any(String), client_metadata: expect.any(Object), store: false, stream: true });
      expect(responses.dropped).toBeNull();
    } else {
      // Translated: the developer text as the system prompt, the function tools only, the rest named.
      expect(sent!.system).toEqual(expect.stringContaining('Codex'));
      expect(sent!.tools.map((t: Loose) => t.name)).toEqual(expect.arrayContaining(['exec_command', 'view_image']));
      expect(responses.dropped!.split(',')).toEqual(expect.arrayContaining(['include', 'prompt_cache_key', 'client_metadata', 'tools:namespace', 'tools:web_search']));
    }
  });

  it('runs a function tool and answers with its output', async () => {
    const before = fixture.sandbox.received.length;
    // The sandbox model calls Codex's `get_goal` (no arguments, no side effects), then answers with what it returned.
    const run = await codexExec('What is the goal? [sandbox tool=get_goal]');
    const sent = expectServed(run, before);
    expect(sent).toHaveLength(2);
    // get_goal's answer in a thread without a goal.
    expect(run.stdout.trim()).toMatch(/^The tool said: \{"goal":null/);
    const second = sent[1]!;
    if (kind === 'openai') {
      // The turn goes back whole: the reasoning item with its encrypted content, the call, its output.
      expect(second.input.slice(-3)).toMatchObject([
        { type: 'reasoning', encrypted_content: expect.any(String) },
        { type: 'function_call', name: 'get_goal' },
        { type: 'function_call_output', call_id: second.input.at(-2).call_id, output: expect.stringContaining('"goal":null') },
      ]);
    } else {
      expect(second.messages.slice(-2)).toMatchObject([
        { role: 'assistant', content: [{ type: 'tool_use', name: 'get_goal' }] },
        { role: 'user', content: [{ type: 'tool_result', content: expect.stringContaining('"goal":null') }] },
      ]);
    }
  });
});
