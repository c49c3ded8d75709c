/**
 * Load for one subject from a separate process: `wrk` (Debian package `wrk`) when it is on PATH,
 * else `autocannon` from bench/peers. One connection per unit of concurrency, no pipelining.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export type LoadResult = { requests: number; seconds: number; rps: number; p50Ms: number; p99Ms: number; errors: number; errorSample?: string };
export type LoadSpec = {
  url: string;
  /** Sent with every request; `authorization` is taken in turn from `bearers` when given. */
  headers: Record<string, string>;
  bearers?: string[];
  body: string;
  connections: number;
  seconds: number;
};

export type LoadTool = { name: string; version: string; run(spec: LoadSpec, workDir: string): Promise<LoadResult> };

const AUTOCANNON = path.join(__dirname, '..', 'peers', 'node_modules', 'autocannon', 'autocannon.js');

export function findLoadTool(): LoadTool | null {
  const wrk = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  if (!wrk.error) return { name: 'wrk', version: `${wrk.stdout}${wrk.stderr}`.split('\n')[0]!.trim(), run: runWrk };
  if (fs.existsSync(AUTOCANNON)) {
    const version = JSON.parse(fs.readFileSync(path.join(path.dirname(AUTOCANNON), 'package.json'), 'utf8')) as { version: string };
    return { name: 'autocannon', version: `autocannon ${version.version}`, run: runAutocannon };
  }
  return null;
}

const lua = (s: string) => JSON.stringify(s); // a JSON string is a valid Lua string literal here

function wrkScript(spec: LoadSpec): string {
  const bearers = spec.bearers ?? [];
  return `
wrk.method = "POST"
wrk.body = ${lua(spec.body)}
${Object.entries(spec.headers).map(([k, v]) => `wrk.headers[${lua(k)}] = ${lua(v)}`).join('\n')}
local bearers = { ${bearers.map((b) => lua(`Bearer ${b}`)).join(', ')} }
local n = 0
if #bearers > 0 then
  request = function()
    n = n + 1
    return wrk.format(nil, nil, { ["authorization"] = bearers[(n % #bearers) + 1] }, nil)
  end
end
local threads = {}
setup = function(thread) table.insert(threads, thread) end
bad = ""
response = function(status, headers, body)
  if status >= 300 and #bad < 300 then bad = bad .. status .. " " .. string.gsub(string.sub(body or "", 1, 140), "%s+", " ") .. " | " end
end
done = function(summary, latency, requests)
  local e = summary.errors
  local sample = ""
  for _, t in ipairs(threads) do sample = sample .. (t:get("bad") or "") end
  io.write(string.format('RESULT {"requests":%d,"us":%d,"errors":%d,"p50":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
  io.write("BAD " .. sample .. "\\n")
end
`;
}

function runChild(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', reject);
    // 'close', not 'exit': a child's output may still be in the pipe when it exits, and wrk's
    // result is its last line (an 'exit' handler read it empty now and then under load).
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${err.trim() || out.trim()}`))));
  });
}

/** Several wrk runs at once (bench:scale-out) each need a script file of their own. */
let scripts = 0;

async function runWrk(spec: LoadSpec, workDir: string): Promise<LoadResult> {
  const script = path.join(workDir, `wrk-${process.pid}-${++scripts}.lua`);
  fs.writeFileSync(script, wrkScript(spec));
  try {
    const out = await runChild('wrk', ['-t1', `-c${spec.connections}`, `-d${spec.seconds}s`, '--timeout', '10s', '-s', script, spec.url]);
    const line = out.split('\n').find((l) => l.startsWith('RESULT '));
    if (!line) throw new Error(`wrk printed no result: ${out.trim()}`);
    const r = JSON.parse(line.slice(7)) as { requests: number; us: number; errors: number; p50: number; p99: number };
    const seconds = r.us / 1e6;
    const bad = out.split('\n').find((l) => l.startsWith('BAD '))?.slice(4).trim();
    return { requests: r.requests, seconds, rps: r.requests / seconds, p50Ms: r.p50 / 1000, p99Ms: r.p99 / 1000, errors: r.errors, ...(bad && { errorSample: bad }) };
  } finally {
    fs.rmSync(script, { force: true });
  }
}

/** autocannon sends fixed headers: with several bearers it uses the first. */
async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const headers = { ...spec.headers, ...(spec.bearers?.length ? { authorization: `Bearer ${spec.bearers[0]}` } : {}) };
  const args = [AUTOCANNON, '--json', '-c', String(spec.connections), '-d', String(spec.seconds), '-m', 'POST', '-b', spec.body];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  args.push(spec.url);
  const r = JSON.parse(await runChild(process.execPath, args)) as {
    requests: { total: number }; duration: number; latency: { p50: number; p99: number }; errors: number; timeouts: number; non2xx: number;
  };
  return { requests: r.requests.total, seconds: r.duration, rps: r.requests.total / r.duration, p50Ms: r.latency.p50, p99Ms: r.latency.p99, errors: r.errors + r.timeouts + r.non2xx };
}
