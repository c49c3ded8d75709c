import { Worker } from 'node:worker_threads';

/**
 * Guardrail `regex` scans too large for the event loop, run on a worker thread (issue 52).
 *
 * RE2 reads a text in linear time, but at up to about 33 ns a character for each instruction of
 * the patterns' programs (bench/results/2026-11-29-issue-52-pattern-bounds.md), and a search
 * cannot be interrupted: a policy at the bounds (2,000 instructions) over a 1,000,000-character
 * prompt would hold the one event loop every tenant shares for about a minute. Benign patterns
 * cost a fraction of a microsecond a character, so refusing long prompts by that worst case
 * would refuse what customers legitimately send. A scan whose worst case is past what the event
 * loop may spend (engine.ts, INLINE_REGEX_WORK) comes here instead: the thread takes one scan at
 * a time, a scan past its deadline is stopped by ending the thread (`terminate()` stops even a
 * search in progress), and the next scan gets a new one. Scans wait their turn per tenant, in
 * rotation, so one organization's scans cannot keep another's waiting behind all of them, and
 * each organization has only a few waiting at once.
 *
 * The thread runs a few lines of plain JavaScript (`eval`), so it needs no TypeScript loader
 * under tsx, Jest or the production build; it is given re2js's resolved path.
 */

/** One pattern as the regex detector compiled it. */
export type OffloadPattern = { source: string; caseInsensitive: boolean };

/**
 * Scans of one tenant waiting or running at once; past it a scan fails at once, an engine error
 * as for a text past MAX_SCAN_CHARS (`on_engine_error` decides). Only that tenant's own load
 * reaches it: each of its requests holds its text in memory while it waits anyway.
 */
export const OFFLOAD_WAITING_PER_TENANT = 16;
/** Patterns the thread keeps compiled, by source and flag (a policy's are compiled once, not per scan). */
const WORKER_COMPILED_MAX = 1_000;

/** Why a scan did not run or did not finish: the regex detector fails, and `on_engine_error` decides. */
export class OffloadError extends Error {}

/** The worker's code: compile (cached), find every non-empty match of every pattern, spans flat as [start, end, ...] per segment. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { RE2JS } = require(workerData.re2js);
parentPort.postMessage({ ready: true });
const compiled = new Map();
function compile(p) {
  const key = (p.caseInsensitive ? 'i:' : 's:') + p.source;
  let re = compiled.get(key);
  if (!re) {
    if (compiled.size >= ${WORKER_COMPILED_MAX}) compiled.clear();
    re = RE2JS.compile(p.source, p.caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0);
    compiled.set(key, re);
  }
  return re;
}
parentPort.on('message', (job) => {
  try {
    const patterns = job.patterns.map(compile);
    const spans = job.segments.map((text) => {
      const out = [];
      if (text.length === 0) return out;
      for (const re of patterns) {
        const m = re.matcher(text);
        while (m.find()) if (m.end() > m.start()) out.push(m.start(), m.end());
      }
      return out;
    });
    parentPort.postMessage({ id: job.id, spans });
  } catch (err) {
    parentPort.postMessage({ id: job.id, error: String((err && err.message) || err) });
  }
});
`;

type Job = {
  id: number;
  tenant: string;
  patterns: readonly OffloadPattern[];
  segments: readonly string[];
  deadlineMs: number;
  resolve(spans: number[][]): void;
  reject(err: Error): void;
};

/** The thread, and whether it has loaded re2js (a scan's deadline starts only then). */
type Thread = { worker: Worker; ready: Promise<void> };

export class RegexOffload {
  private thread: Thread | null = null;
  /** The scan the thread has (or is about to be given), and its deadline once it was handed over. */
  private running: { job: Job; timer: NodeJS.Timeout | null } | null = null;
  /** Waiting scans per tenant, and the tenants in the order they take turns. */
  private readonly waiting = new Map<string, Job[]>();
  private readonly turns: string[] = [];
  private nextId = 1;
  private closed = false;

  /**
   * Every non-empty match of each pattern in each segment, as flat `[start, end, ...]` lists;
   * rejects with an OffloadError when the tenant already has its most waiting, or when the scan
   * ran past `deadlineMs` once the thread had it.
   */
  scan(tenant: string, patterns: readonly OffloadPattern[], segments: readonly string[], deadlineMs: number): Promise<number[][]> {
    if (this.closed) return Promise.reject(new OffloadError('the regex scanner is closed'));
    const queue = this.waiting.get(tenant) ?? [];
    const runningHere = this.running?.job.tenant === tenant ? 1 : 0;
    if (queue.length + runningHere >= OFFLOAD_WAITING_PER_TENANT) {
      return Promise.reject(new OffloadError(`this organization already has ${OFFLOAD_WAITING_PER_TENANT} long regex scans under way`));
    }
    return new Promise((resolve, reject) => {
      queue.push({ id: this.nextId++, tenant, patterns, segments, deadlineMs, resolve, reject });
      if (!this.waiting.has(tenant)) {
        this.waiting.set(tenant, queue);
        this.turns.push(tenant);
      }
      this.dispatch();
    });
  }

  /** Ends the thread; scans waiting or running fail. */
  async close(): Promise<void> {
    this.closed = true;
    const failed = new OffloadError('the regex scanner is closed');
    for (const queue of this.waiting.values()) for (const job of queue) job.reject(failed);
    this.waiting.clear();
    this.turns.length = 0;
    this.finish(failed);
    await this.stopThread();
  }

  /**
   * The next tenant's oldest scan, when the thread is free. The tenant whose scan just ran goes
   * after any other waiting, however early its next scan arrived.
   */
  private dispatch(justRan?: string): void {
    if (this.running || this.closed || this.turns.length === 0) return;
    if (this.turns.length > 1 && this.turns[0] === justRan) this.turns.push(this.turns.shift()!);
    const tenant = this.turns.shift()!;
    const queue = this.waiting.get(tenant)!;
    const job = queue.shift()!;
    // A tenant with more waiting goes to the back of the rotation.
    if (queue.length > 0) this.turns.push(tenant);
    else this.waiting.delete(tenant);
    const running: NonNullable<RegexOffload['running']> = { job, timer: null };
    this.running = running;
    let thread: Thread;
    try {
      thread = this.ensureThread();
    } catch (err) {
      this.finish(new OffloadError(`the regex thread could not start: ${(err as Error).message}`));
      return;
    }
    // The deadline counts from when the thread can search, not from its start: a scan after one
    // that was ended pays no other tenant's start-up.
    thread.ready.then(() => {
      if (this.running !== running || this.thread !== thread) return;
      running.timer = setTimeout(() => {
        // A search cannot be interrupted; ending the thread stops it, and the next scan gets a new one.
        void this.stopThread();
        this.finish(new OffloadError(`a regex rule ran past its ${job.deadlineMs} ms deadline`));
      }, job.deadlineMs);
      running.timer.unref();
      try {
        thread.worker.postMessage({ id: job.id, patterns: job.patterns, segments: job.segments });
      } catch (err) {
        this.finish(new OffloadError(`the regex thread could not take the scan: ${(err as Error).message}`));
      }
    }, () => undefined);
  }

  private finish(outcome: number[][] | Error): void {
    const running = this.running;
    if (!running) return;
    this.running = null;
    if (running.timer) clearTimeout(running.timer);
    if (outcome instanceof Error) running.job.reject(outcome);
    else running.job.resolve(outcome);
    this.dispatch(running.job.tenant);
  }

  private ensureThread(): Thread {
    if (this.thread) return this.thread;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { re2js: require.resolve('re2js') } });
    // The thread never keeps a stopping process alive.
    worker.unref();
    let started!: () => void;
    let failed!: (err: Error) => void;
    const ready = new Promise<void>((resolve, reject) => {
      started = resolve;
      failed = reject;
    });
    ready.catch(() => undefined);
    const thread: Thread = { worker, ready };
    worker.on('message', (message: { ready?: true; id?: number; spans?: number[][]; error?: string }) => {
      if (message.ready) return started();
      if (this.running?.job.id !== message.id) return;
      this.finish(message.error === undefined ? message.spans! : new OffloadError(`a regex rule failed: ${message.error}`));
    });
    const lost = (why: string) => {
      failed(new OffloadError(why));
      if (this.thread !== thread) return;
      this.thread = null;
      this.finish(new OffloadError(why));
    };
    worker.on('error', (err) => lost(`the regex thread failed: ${err.message}`));
    worker.on('exit', (code) => lost(`the regex thread ended (exit ${code})`));
    this.thread = thread;
    return thread;
  }

  private async stopThread(): Promise<void> {
    const thread = this.thread;
    this.thread = null;
    if (thread) await thread.worker.terminate();
  }
}

/** The process's one offload thread, made when first needed. */
let shared: RegexOffload | null = null;
export function regexOffload(): RegexOffload {
  return (shared ??= new RegexOffload());
}
