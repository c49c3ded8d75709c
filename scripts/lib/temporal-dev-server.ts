import { spawn, type ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../../workflows/definitions';

export type DevServerOptions = {
  cliPath: string;
  port: number;
  /** Web UI port; omitted runs headless. */
  uiPort?: number;
  /** SQLite file that keeps workflows across restarts; omitted keeps them in memory. */
  dbFile?: string;
  namespace?: string;
  /** Fire timers when due rather than on the next whole second (for compressed schedules). */
  preciseTimers?: boolean;
  /** SQLite pragmas for the file (DEV_SERVER_SQLITE_PRAGMAS); omitted keeps SQLite's defaults. */
  sqlitePragmas?: Record<string, string>;
  /** Where the Web UI decodes sealed payloads (the API's /temporal-codec). */
  uiCodecEndpoint?: string;
  /** Go runtime settings for the server (DEV_SERVER_GO_RUNTIME); the environment's own win. */
  goRuntime?: Record<string, string>;
};

/**
 * The write-ahead log, synced at checkpoints: SQLite's defaults (a rollback journal, synced at
 * every commit) cost the dev server about a third more CPU per activity retry (bench/results/
 * *-retry-floor.md), and every status check and delivery attempt is one. A crash of the machine
 * (not of the process) may lose the last commits; the dev server is for development and small
 * installs, and production runs a Temporal cluster.
 */
export const DEV_SERVER_SQLITE_PRAGMAS: Record<string, string> = { journal_mode: 'wal', synchronous: 'normal' };

/**
 * The Go collector runs a fifth as often as by default (a heap up to five times the live one, a
 * few hundred MB for the dev server): about a tenth less of the server's CPU per activity retry
 * (bench/results/*-retry-floor.md). An operator's own GOGC or GOMEMLIMIT takes precedence.
 */
export const DEV_SERVER_GO_RUNTIME: Record<string, string> = { GOGC: '400' };

export type DevServer = { address: string; process: ChildProcess; stop(): Promise<void> };

/** Starts tried before giving up when the CLI's own HTTP API port was taken as it bound it. */
const START_ATTEMPTS = 3;

type Started = { child: ChildProcess };

/** One start of the CLI: ready when it answers, or why it is not (it exited, or 60 s passed). */
async function startOnce(cliPath: string, args: string[], env: NodeJS.ProcessEnv, address: string): Promise<Started | { error: string }> {
  const child = spawn(cliPath, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: false, env });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  process.once('exit', () => child.kill('SIGTERM'));
  const said = () => (stderr ? `; temporal said: ${stderr.trim().split('\n').pop()}` : '');
  const deadline = Date.now() + 60_000;
  for (;;) {
    // An exited CLI ends the wait at once, with what it said.
    if (exited) return { error: `the Temporal dev server exited${said()}` };
    const answered = await (async () => {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await connection.workflowService.getSystemInfo({});
        return true;
      } finally {
        await connection.close();
      }
    })().catch(() => false);
    if (answered) return { child };
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      return { error: `the Temporal dev server did not come up within 60 s${said()}` };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** `temporal server start-dev` with our search attributes registered, ready when it answers. */
export async function startTemporalDevServer(options: DevServerOptions): Promise<DevServer> {
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(options.port), '--log-level', 'error'];
  if (options.uiPort) args.push('--ui-port', String(options.uiPort));
  else args.push('--headless');
  if (options.dbFile) args.push('--db-filename', options.dbFile);
  if (options.namespace && options.namespace !== 'default') args.push('--namespace', options.namespace);
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) args.push('--search-attribute', `${name}=${type}`);
  // Timers fire on one-second boundaries by default; compressed schedules (GW_SCHEDULE_SCALE)
  // in development and tests need them to fire when they are due.
  if (options.preciseTimers) args.push('--dynamic-config-value', 'history.timerProcessorMaxTimeShift="10ms"');
  // A workflow's first activity goes to the worker that scheduled it, in the answer to its
  // workflow task, when that worker has a slot free: no round trip through matching.
  args.push('--dynamic-config-value', 'system.enableActivityEagerExecution=true');
  for (const [name, value] of Object.entries(options.sqlitePragmas ?? {})) args.push('--sqlite-pragma', `${name}=${value}`);
  if (options.uiCodecEndpoint && options.uiPort) args.push('--ui-codec-endpoint', options.uiCodecEndpoint);

  const env = { ...options.goRuntime, ...process.env };
  const address = `127.0.0.1:${options.port}`;
  // The CLI picks its own HTTP API port as it starts; another process can take that port first.
  // Such a start is tried again (the CLI then picks another); our own port taken is not.
  let started: Started | null = null;
  for (let attempt = 1; !started; attempt++) {
    const outcome = await startOnce(options.cliPath, args, env, address);
    if ('child' in outcome) started = outcome;
    else if (attempt < START_ATTEMPTS && outcome.error.includes('address already in use') && !outcome.error.includes(`:${options.port}:`)) continue;
    else throw new Error(outcome.error);
  }
  const { child } = started;
  let exited = child.exitCode !== null;
  child.once('exit', () => (exited = true));

  return {
    address,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}
