import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { cliClient } from '../helpers/cli-clients';

/**
 * Claude Code itself (the CLI, headless `claude -p`), set up as a new user would point it at a
 * gateway: base URL, key and model, nothing else, through an OpenAI connection (the Messages
 * request translated both ways) and an Anthropic one (passed along natively). It sends what
 * today's Messages API takes: `system` messages between turns, adaptive thinking,
 * `output_config.effort` and `context_management` (issue 53). A recorder between it and the
 * gateway keeps every request it made and the status the gateway answered; the sandbox keeps
 * what the gateway sent on.
 */
const CLAUDE_CODE = { pkg: '@anthropic-ai/claude-code', version: '2.1.332', bin: 'claude' };

type Exchange = { method: string; url: string; status: number; dropped: string | null; body: Loose | null };

/** A pass-through to the gateway that records each request (method, path, JSON body) and the answer's status. */
async function startRecorder(target: string): Promise<{ url: string; exchanges: Exchange[]; close(): Promise<void> }> {
  const exchanges: Exchange[] = [];
  const to = new URL(target);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const sent = Buffer.concat(chunks);
      const upstream = http.request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...req.headers, host: to.host } }, (answer) => {
        let body: Loose | null = null;
        try {
          body = sent.length > 0 ? JSON.parse(sent.toString('utf8')) as Loose : null;
        } catch {
          body = null;
        }
        exchanges.push({ method: req.method ?? '', url: req.url ?? '', status: answer.statusCode ?? 0, dropped: (answer.headers['x-gw-params-dropped'] as string | undefined) ?? null, body });
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      upstream.end(sent);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exchanges,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

type Run = { code: number | null; stdout: string; stderr: string };

/** Exit code and answer; what Claude Code said on stderr too when it failed, so a failure says why. */
const outcome = (run: Run) => ({ code: run.code, stdout: run.stdout.trim(), ...(run.code !== 0 && { stderr: run.stderr }) });

/**
 * `claude -p <prompt>` with only the gateway's base URL, the key and the model, in an empty
 * home and working folder (no user settings, no project), and the switches that keep it off
 * the internet (this machine has none): no telemetry, error reports, update checks or other
 * traffic that is not the model's.
 */
function claude(bin: string, prompt: string, env: { baseUrl: string; key: string; model: string }, cwd: string, home: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['-p', prompt], {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH,
        HOME: home,
        ANTHROPIC_BASE_URL: env.baseUrl,
        ANTHROPIC_API_KEY: env.key,
        ANTHROPIC_MODEL: env.model,
        // The model behind the `haiku`, `sonnet` and `opus` aliases (subagents, small background calls).
        ANTHROPIC_DEFAULT_HAIKU_MODEL: env.model,
        ANTHROPIC_DEFAULT_SONNET_MODEL: env.model,
        ANTHROPIC_DEFAULT_OPUS_MODEL: env.model,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const WIRES = [
  // Claude Code does not know this model: it sends every field it has (effort included).
  { kind: 'openai', model: 'openai/gpt-4o-mini', served: 'gpt-4o-mini' },
  // A model it knows to take system messages between turns, adaptive thinking and an effort.
  { kind: 'anthropic', model: 'anthropic/claude-opus-5', served: 'claude-opus-5' },
] as const;

describe.each(WIRES)('Claude Code through the gateway to $kind', ({ kind, model, served }) => {
  let fixture: ChatFixture;
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  let secret: string;
  let bin: string;
  let home: string;
  let cwd: string;

  beforeAll(async () => {
    // Throws (failing the tests, saying why) when Claude Code cannot be installed.
    bin = cliClient(CLAUDE_CODE.pkg, CLAUDE_CODE.version, CLAUDE_CODE.bin);
    fixture = await startChatFixture();
    await fixture.connect(kind);
    secret = await fixture.key();
    recorder = await startRecorder(fixture.api.url);
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-claude-home-'));
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-claude-work-'));
    // A first install (once per machine) takes minutes; after it, a second or two.
  }, 600_000);
  afterAll(async () => {
    await recorder?.close();
    await fixture?.close();
    for (const dir of [home, cwd]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Runs Claude Code; answers its run, the exchanges it had with the gateway and what reached the sandbox. */
  async function ask(prompt: string) {
    const exchangesBefore = recorder.exchanges.length;
    const receivedBefore = fixture.sandbox.received.length;
    const run = await claude(bin, prompt, { baseUrl: recorder.url, key: secret, model }, cwd, home);
    return { run, exchanges: recorder.exchanges.slice(exchangesBefore), received: fixture.sandbox.received.slice(receivedBefore) };
  }

  it('answers a prompt with the sandbox model\'s answer, every request answered 200', async () => {
    // The sandbox would call the first tool Claude Code offers; this asks it to answer in text.
    const { run, exchanges, received } = await ask('Say hello [sandbox tool=none]');
    expect(outcome(run)).toEqual({ code: 0, stdout: `Hello from the sandbox model ${served}.` });
    expect(exchanges.length).toBeGreaterThan(0);
    for (const e of exchanges) expect({ method: e.method, path: e.url.split('?')[0], status: e.status }).toEqual({ method: 'POST', path: '/v1/messages', status: 200 });

    // What Claude Code sends today (the request that failed `400 Invalid messages.1.role`): its last made the answer.
    const answered = exchanges.at(-1)!;
    const request = answered.body!;
    expect(request.messages.map((m: Loose) => m.role)).toEqual(['user', 'system']);
    expect(request).toMatchObject({ thinking: { type: 'adaptive' }, output_config: { effort: expect.any(String) }, context_management: { edits: expect.any(Array) } });

    const sent = received.at(-1)!.body as Loose;
    if (kind === 'openai') {
      // Translated: the system message where it stood; no effort for a model that does not reason.
      expect(received.at(-1)!.path).toBe('/openai/v1/chat/completions');
      expect(sent.messages.map((m: Loose) => m.role)).toEqual(['system', 'user', 'system']);
      expect(sent).not.toHaveProperty('reasoning_effort');
      expect(answered.dropped).toBe('output_config.effort,thinking,context_management');
    } else {
      // As it came, but for the beta field this connection does not turn on.
      expect(received.at(-1)!.path).toBe('/anthropic/v1/messages');
      expect(sent.messages.map((m: Loose) => m.role)).toEqual(['user', 'system']);
      expect(sent).toMatchObject({ thinking: request.thinking, output_config: request.output_config });
      expect(sent).not.toHaveProperty('context_management');
      expect(answered.dropped).toBe('context_management');
    }
  });

  it('runs a tool the model called and answers with what the tool said', async () => {
    // The sandbox calls Read (with made-up arguments: Claude Code refuses them as a tool error), then answers the result.
    const { run, exchanges, received } = await ask('Read the notes [sandbox tool=Read]');
    expect(outcome(run)).toEqual({ code: 0, stdout: expect.stringMatching(/^The tool said: /) });
    expect(exchanges.length).toBeGreaterThanOrEqual(2);
    for (const e of exchanges) expect({ path: e.url.split('?')[0], status: e.status }).toEqual({ path: '/v1/messages', status: 200 });
    // The request after the tool ran: the tool use, its result, and (Claude Code's way) a system message after them.
    const blocks = (request: Loose) => request.messages.flatMap((m: Loose) => (Array.isArray(m.content) ? m.content.map((b: Loose) => ({ role: m.role, ...b })) : []));
    const second = blocks(exchanges.at(-1)!.body!);
    const use = second.find((b: Loose) => b.type === 'tool_use');
    expect(use).toMatchObject({ role: 'assistant', name: 'Read' });
    expect(second).toContainEqual(expect.objectContaining({ role: 'user', type: 'tool_result', tool_use_id: use.id }));
    const sent = received.at(-1)!.body as Loose;
    if (kind === 'openai') expect(sent.messages).toContainEqual(expect.objectContaining({ role: 'tool', tool_call_id: use.id }));
    else expect(blocks(sent)).toContainEqual(expect.objectContaining({ role: 'user', type: 'tool_result', tool_use_id: use.id }));
  });
});
