/**
 * The processes a bench starts (each its own, logging to a file), the clean-ups that stop them,
 * and the entry every bench script runs through (stops everything on failure or Ctrl-C).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { waitFor } from '../../scripts/lib/ports';

export const ROOT = path.resolve(__dirname, '..', '..');

export const log = (what: string) => console.log(`[bench] ${what}`);

/** Run in reverse order at the end, whether the bench succeeded or not. */
export const cleanups: Array<() => Promise<void> | void> = [];

/**
 * A checkout and the Node that runs it: this one with this process's Node, or another (a
 * baseline to compare with in the same run: BENCH_BASELINE, BENCH_BASELINE_NODE).
 */
export type Tree = { root: string; node: string };
export const THIS_TREE: Tree = { root: ROOT, node: process.execPath };

/** A Node process of a checkout (cwd its root; this one unless told), its output appended to `logFile`. */
export function node(args: string[], env: Record<string, string | undefined>, logFile: string, tree: Tree = THIS_TREE): ChildProcess {
  const out = fs.openSync(logFile, 'a');
  const child = spawn(tree.node, args, { cwd: tree.root, env: { ...process.env, ...env }, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  cleanups.push(() => stopChild(child));
  return child;
}

const distChecked = new Set<string>();

/**
 * `dist/<entry>.js` (e.g. `api/server`), the compiled process production runs with plain node
 * (`npm run build`). The first call builds when dist/ is missing or older than the sources
 * (scripts/run-built.cjs decides and prints the progress); later ones do not check again, so a
 * source edited during a run does not rebuild dist/ between its subjects.
 */
export function builtEntry(entry: string, tree: Tree = THIS_TREE): string {
  if (!distChecked.has(tree.root)) {
    const result = spawnSync(tree.node, [path.join('scripts', 'run-built.cjs')], { cwd: tree.root, stdio: 'inherit' });
    if (result.status !== 0) throw new Error(`the build of ${tree.root} failed (see above)`);
    const { startedAt } = JSON.parse(fs.readFileSync(path.join(tree.root, 'dist', 'build.json'), 'utf8')) as { startedAt: number };
    log(`${tree.root === ROOT ? 'the API and workers run' : `the baseline in ${tree.root} runs`} compiled: dist/, built ${new Date(startedAt).toISOString()} (npm run build)`);
    distChecked.add(tree.root);
  }
  return path.join(tree.root, 'dist', `${entry}.js`);
}

/**
 * The Node flags a checkout's production processes start with: those between `node` and
 * `scripts/run-built.cjs` in its package.json `api` script (`npm run api`), so a subject runs as
 * production starts it and a baseline as its own checkout does. None when the script has none.
 */
export function productionNodeFlags(tree: Tree = THIS_TREE): string[] {
  const scripts = (JSON.parse(fs.readFileSync(path.join(tree.root, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }).scripts ?? {};
  const flags = /\bnode\s+((?:--\S+\s+)*)scripts\/run-built\.cjs\b/.exec(scripts.api ?? '')?.[1] ?? '';
  return flags.split(/\s+/).filter(Boolean);
}

export function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5000).unref();
  });
}

export async function waitForPort(what: string, port: number, child: ChildProcess, logFile: string): Promise<void> {
  await waitFor(what, async () => {
    if (child.exitCode !== null) throw new Error(`${what} exited: ${tail(logFile)}`);
    return new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
  }, 60_000).catch((err: Error) => {
    throw new Error(`${err.message}; its log: ${tail(logFile)}`);
  });
}

/** The last lines of a log file, on one line. */
export const tail = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').slice(-5).join(' | ') : '(no log)');

/** A temporary folder for logs, scripts and services, removed at the end (kept, with its path printed, under BENCH_KEEP_WORK=1). */
export function workDir(): string {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-'));
  fs.chmodSync(work, 0o755);
  if (process.env.BENCH_KEEP_WORK === '1') cleanups.push(() => log(`kept the work folder (logs): ${work}`));
  else cleanups.push(() => fs.rmSync(work, { recursive: true, force: true }));
  return work;
}

async function cleanup(): Promise<void> {
  for (const stop of cleanups.reverse()) await Promise.resolve().then(stop).catch(() => undefined);
}

/** Runs a bench's main, then every clean-up; a failure is one line and exit code 1. */
export function runBench(main: () => Promise<void>): void {
  process.on('SIGINT', () => void cleanup().then(() => process.exit(130)));
  main()
    .then(cleanup, async (err: Error) => {
      console.error(`[bench] failed: ${err.message}`);
      await cleanup();
      process.exitCode = 1;
    })
    .then(() => process.exit());
}

/**
 * Waits until the worker process `child` polls `queue` for activities (its own poller, by pid:
 * a killed one's stays listed a while), or fails with its log's tail when it exits first.
 */
export async function waitForWorkerPolling(what: string, child: ChildProcess, logFile: string, client: Client, namespace: string, queue: string): Promise<void> {
  const exited = new Promise<never>((_, reject) => child.once('exit', () => reject(new Error(`${what} exited: ${tail(logFile)}`))));
  exited.catch(() => undefined);
  const polling = waitFor(`${what} polling`, async () => {
    const response = await client.workflowService.describeTaskQueue({
      namespace,
      taskQueue: { name: queue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    });
    return (response.pollers ?? []).some((p) => p.identity?.startsWith(`${child.pid}@`));
  }, 180_000);
  await Promise.race([polling, exited]);
}
