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

/** Scans of one tenant waiting or running at once; past it a scan fails at once (an engine error). */
export const OFFLOAD_WAITING_PER_TENANT = 4;
/** Patterns the thread keeps compiled, by source and flag (a policy's are compiled once, not per scan). */
const WORKER_COMPILED_MAX = 1_000;

/** Why a scan did not run or did not finish: the regex detector fails, and `on_engine_error` decides. */
export class OffloadError extends Error {}

/** The worker's code: compile (cached), find every non-empty match of every pattern, spans flat as [start, end, ...] per segment. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { RE2JS } = require(workerData.re2js);
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

export class RegexOffload {
  private worker: Worker | null = null;
  private running: { job: Job; timer: NodeJS.Timeout } | null = null;
  /** Waiting scans per tenant, and the tenants in the order they take turns. */
  private readonly waiting = new Map<string, Job[]>();
  private readonly turns: string[] = [];
  private nextId = 1;
  private closed = false;

  /**
   * Every non-empty match of each pattern in each segment, as flat `[start, end, ...]` lists;
   * rejects with an OffloadError when the tenant already has its most waiting, or when the scan
   * ran past `deadlineMs` once started.
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
    await this.stopWorker();
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
    const timer = setTimeout(() => {
      // A search cannot be interrupted; ending the thread stops it, and the next scan gets a new one.
      void this.stopWorker();
      this.finish(new OffloadError(`a regex rule ran past its ${job.deadlineMs} ms deadline`));
    }, job.deadlineMs);
    this.running = { job, timer };
    this.ensureWorker().postMessage({ id: job.id, patterns: job.patterns, segments: job.segments });
  }

  private finish(outcome: number[][] | Error): void {
    const running = this.running;
    if (!running) return;
    this.running = null;
    clearTimeout(running.timer);
    if (outcome instanceof Error) running.job.reject(outcome);
    else running.job.resolve(outcome);
    this.dispatch(running.job.tenant);
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { re2js: require.resolve('re2js') } });
    // The thread never keeps a stopping process alive.
    worker.unref();
    worker.on('message', (message: { id: number; spans?: number[][]; error?: string }) => {
      if (this.running?.job.id !== message.id) return;
      this.finish(message.error === undefined ? message.spans! : new OffloadError(`a regex rule failed: ${message.error}`));
    });
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.finish(new OffloadError(why));
    };
    worker.on('error', (err) => lost(`the regex thread failed: ${err.message}`));
    worker.on('exit', (code) => lost(`the regex thread ended (exit ${code})`));
    this.worker = worker;
    return worker;
  }

  private async stopWorker(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
  }
}

/** The process's one offload thread, made when first needed. */
let shared: RegexOffload | null = null;
export function regexOffload(): RegexOffload {
  return (shared ??= new RegexOffload());
}
