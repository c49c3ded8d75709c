#!/usr/bin/env node
// `npm start` and `npm test` on a fresh clone: install what is missing, then run.
// Plain Node with no dependencies, because node_modules may not exist yet.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const mode = process.argv[2];
const passThrough = process.argv.slice(3);

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', ...options });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

/**
 * A step whose own output is a package manager's hundreds of lines: kept in a log file, with one
 * line said before and one after (its time), and the log's last lines only when it fails.
 */
function quietly(label, command, args, options = {}) {
  const log = path.join(require('node:os').tmpdir(), `gw-setup-${path.basename(command)}-${process.pid}-${Date.now()}.log`);
  const started = Date.now();
  console.error(`[setup] ${label}...`);
  const out = fs.openSync(log, 'w');
  let status;
  try {
    status = run(command, args, { ...options, stdio: ['ignore', out, out] });
  } finally {
    fs.closeSync(out);
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  if (status === 0) {
    console.error(`[setup] ${label}: done (${seconds}s)`);
    fs.rmSync(log, { force: true });
  } else {
    const tail = fs.readFileSync(log, 'utf8').trim().split('\n').slice(-15).map((l) => `[setup]   ${l}`).join('\n');
    console.error(`[setup] ${label}: failed (exit ${status}); the last lines of ${log}:\n${tail}`);
  }
  return status;
}

function dependenciesStale() {
  const marker = path.join(root, 'node_modules', '.package-lock.json');
  const lock = path.join(root, 'package-lock.json');
  if (!fs.existsSync(marker)) return true;
  return fs.statSync(marker).mtimeMs < fs.statSync(lock).mtimeMs;
}

function hasCommand(name) {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

/**
 * Installs Debian's `chromium` for the browser tests when no Chromium is on the machine and
 * this runs as root with apt-get. Otherwise it says so; the browser tests then fail plainly.
 */
function ensureChromium() {
  if (process.env.CHROME_PATH || ['chromium', 'chromium-browser', 'google-chrome'].some(hasCommand)) return;
  if (process.getuid?.() !== 0 || !hasCommand('apt-get')) {
    console.error('[setup] no Chromium for the console browser tests: install `chromium` or set CHROME_PATH');
    return;
  }
  quietly('updating the apt package lists (once per machine, for chromium)', 'apt-get', ['update', '-qq']);
  const status = quietly('installing Debian\'s chromium for the console browser tests (apt-get; once per machine)', 'apt-get', ['install', '-y', '-qq', 'chromium'], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (status !== 0) console.error('[setup] the browser tests will say Chromium is missing');
}

/**
 * Installs Debian's `prometheus` for the test that has it scrape the API, once per machine, as
 * Chromium is (root with apt-get); otherwise that test says plainly what is missing.
 */
function ensurePrometheus() {
  if (process.env.PROMETHEUS_PATH || hasCommand('prometheus')) return;
  if (process.getuid?.() !== 0 || !hasCommand('apt-get')) {
    console.error('[setup] no Prometheus for the metrics test: install `prometheus` or set PROMETHEUS_PATH');
    return;
  }
  const install = () => quietly('installing Debian\'s prometheus for the metrics test (apt-get; once per machine)', 'apt-get', ['install', '-y', '-qq', 'prometheus'], {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  // The package lists may be older than the archive: refreshed once if the first try fails.
  if (install() === 0) return;
  quietly('updating the apt package lists (once per machine, for prometheus)', 'apt-get', ['update', '-qq']);
  if (install() !== 0) console.error('[setup] the metrics test will say Prometheus is missing');
}

/**
 * Jaeger for the tracing test, built once per machine from its Go module by scripts/setup-jaeger
 * (several minutes the first time). Started first and in the background, so that a first build
 * overlaps the other steps; its path is awaited just before the tests run.
 */
function startJaegerSetup() {
  const child = require('node:child_process').spawn('bash', [path.join('scripts', 'setup-jaeger')], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const done = new Promise((resolve) => child.on('exit', (code) => resolve(code === 0 ? out.trim().split('\n').pop() : null)));
  // A step failing before the tests exits at once, not after the build (which the next run resumes).
  child.unref();
  child.stdout.unref();
  return {
    wait() {
      child.ref();
      child.stdout.ref();
      return done;
    },
  };
}

/** The Node.js major the product runs on (scripts/setup-node). */
const NODE_MAJOR = 24;

/**
 * On a Node older than NODE_MAJOR (a machine whose system Node is 20, past its end of life):
 * installs Node 24 once per machine (scripts/setup-node, with progress) and runs this same
 * command on it, with its folder first on PATH so that npm, npx and every process started
 * below use it too. Answers the exit code, or null when this Node will do.
 */
async function onSupportedNode() {
  if (Number(process.versions.node.split('.')[0]) >= NODE_MAJOR) return null;
  const setup = spawnSync('bash', [path.join('scripts', 'setup-node')], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  const bin = setup.status === 0 ? setup.stdout.trim().split('\n').pop() : null;
  if (!bin) {
    console.error(`[setup] Node ${NODE_MAJOR} or later is needed (this is ${process.version}) and could not be installed; see above`);
    return 1;
  }
  console.error(`[setup] Node ${process.version} is past its end of life: running on Node ${NODE_MAJOR} from ${bin}`);
  const child = require('node:child_process').spawn(path.join(bin, 'node'), [path.join(__dirname, 'bootstrap.cjs'), ...process.argv.slice(2)], {
    cwd: root, stdio: 'inherit', env: { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` },
  });
  // Ctrl-C reaches the child, and what it runs, from the terminal as it reaches this process:
  // this one waits for it to stop. A SIGTERM or SIGHUP sent to this process alone is passed on to
  // the child, which then stops as this script does on Node 24 when signalled alone: at once,
  // leaving what it was running (the launcher, Jest) to finish or be stopped on its own.
  process.on('SIGINT', () => undefined);
  for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  return new Promise((resolve) => {
    child.on('error', (err) => {
      console.error(`[setup] could not run Node ${NODE_MAJOR} from ${bin}: ${err.message}`);
      resolve(1);
    });
    // A child stopped by a signal answers as a shell would: 128 + the signal's number.
    child.on('exit', (code, signal) => resolve(code ?? 128 + (require('node:os').constants.signals[signal] ?? 0)));
  });
}

async function main() {
  if (mode !== 'start' && mode !== 'test' && mode !== 'test:cluster' && mode !== 'test:soak') {
    console.error('usage: node scripts/bootstrap.cjs start|test|test:cluster|test:soak');
    return 2;
  }
  const relaunched = await onSupportedNode();
  if (relaunched !== null) return relaunched;
  const jaegerSetup = mode === 'test' ? startJaegerSetup() : null;
  if (dependenciesStale() && run('bash', [path.join('scripts', 'install-deps')]) !== 0) {
    console.error('[setup] npm dependencies could not be installed (see above)');
    return 1;
  }
  // The operator console's static build, when missing or older than its sources.
  if (run(process.execPath, [path.join('scripts', 'build-console.cjs')]) !== 0) return 1;
  // The console's browser tests need a Chromium: Debian's package, installed once when missing.
  if (mode === 'test') ensureChromium();
  if (mode === 'test') ensurePrometheus();
  // Locates or builds the Temporal CLI once per machine; prints its path last.
  const setup = spawnSync('bash', [path.join('scripts', 'setup')], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (setup.status !== 0) return 1;
  const cli = setup.stdout.trim().split('\n').pop();
  const env = { ...process.env, TEMPORAL_CLI_PATH: cli };

  const bin = (name) => path.join(root, 'node_modules', '.bin', name);
  if (mode === 'test:cluster') {
    // The Temporal server, its schema tool and UI server, built once per machine (issue 55).
    const cluster = spawnSync('bash', [path.join('scripts', 'setup-temporal-cluster')], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
    if (cluster.status !== 0) return 1;
    env.TEMPORAL_CLUSTER_BIN = cluster.stdout.trim().split('\n').pop();
    return run(process.execPath, ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', bin('jest'), '--config', 'jest.cluster.config.js', '--runInBand', ...passThrough], { env });
  }
  // The money soak's short run (issue 54): three API processes, the workers and services of its
  // own, faults and restarts, about two minutes. Beside `npm test` in `.ci/run`, to keep that
  // under its 15 minutes on two cores.
  if (mode === 'test:soak') {
    return run(process.execPath, ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', bin('jest'), '--runInBand', 'test/soak', ...passThrough], { env });
  }
  // The launcher runs in this Node with tsx's loader, not under the tsx CLI: that wrapper relays a
  // Ctrl-C and, when the launcher's event loop does not acknowledge it within 60 ms (busy
  // stopping), SIGKILLs it, leaving what it started running and exiting 130.
  if (mode === 'start') return run(process.execPath, ['--import', 'tsx', path.join('scripts', 'dev.ts'), ...passThrough], { env });
  const jaeger = await jaegerSetup.wait();
  if (jaeger) env.JAEGER_PATH = jaeger;
  else console.error('[setup] no Jaeger: the tracing test will say so');
  // Jest loads the packages that ship only as ES modules (the Vercel AI SDK 7, eventsource-parser
  // 4) with Node's own require(esm), which it does under --experimental-vm-modules (Jest's
  // docs: ECMAScript modules). The flags are the Jest processes' own (its workers inherit them);
  // the processes tests start do not get them.
  const jest = (args) => run(process.execPath, ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', bin('jest'), ...args], { env });
  if (passThrough.length > 0) return jest(passThrough);
  // Suites that measure the machine run after the rest, each in a Jest process of its own: the
  // console's browser tests drive a Chromium that takes a core of its own, and the multipart
  // intake test measures its own process's memory peak, which another suite's load on the two
  // cores, or what an earlier suite left in the same process, pushes past its bar. Every run
  // always runs; any failing fails. (The money soak runs under `npm run test:soak`.)
  // The regex offload test waits on a thread's deadline: two suites beside it on two cores pushed
  // its scan past the deadline once in CI.
  const ALONE = ['/test/browser/', '/test/api/multipart-intake.test.ts', '/test/unit/regex-offload.test.ts'];
  // test/cluster runs under `npm run test:cluster`, on the cluster it starts (the flag replaces
  // jest.config.js's own ignore list, so it is named again here).
  const rest = jest(['--testPathIgnorePatterns', ...ALONE, '/test/cluster/', '/test/soak/']);
  const alone = ALONE.map((p) => jest(['--runInBand', p.replace(/^\//, '')]));
  return [rest, ...alone].find((code) => code !== 0) ?? 0;
}

main().then((code) => (process.exitCode = code));
