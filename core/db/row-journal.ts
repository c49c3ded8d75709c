import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * A batch writer's rows on local disk until Postgres has them (issue 54's soak: a process
 * SIGKILLed lost the settles and request-log rows still queued in its memory, up to half a
 * second of them). Each row's record text is appended to the writer's current segment file as
 * it is queued; when a batch that took every queued row is in Postgres, the segments before it
 * are removed. A process that starts, and every process now and then, inserts the rows of
 * segments a dead process left behind (inserts are `on conflict do nothing`, so a row written
 * twice counts once) and removes them.
 *
 * Rows are written out once per turn of the event loop, in one write: the page cache keeps them
 * through a SIGKILL (a crash of the machine itself may lose the last ones). Each process keeps a
 * heartbeat file naming its host. A process of this host is dead when its pid no longer runs,
 * or is this process's own (an earlier process of a restarted container); a process of another
 * host sharing the folder, when it has not touched its heartbeat for `STALE_MS`.
 */
export type RowJournal = {
  /** Appends a row's record text, written out before this turn of the event loop ends. */
  append(record: string): void;
  /**
   * Marks what is appended so far as taken by a batch: answers the last segment that holds only
   * such rows (-1: none yet). A new segment starts at most every `SEGMENT_MS`, so a busy writer
   * does not open and remove a file for every batch; rows of the segment still being written
   * stay on disk until a later cut.
   */
  cut(): number;
  /** Every row appended up to `cut()`'s answer is in Postgres: its segments go. */
  release(upTo: number): void;
  /** The rows of segments dead processes left (each segment's rows, and a function that removes it). */
  orphans(): Orphan[];
  /** Writes out what is pending; with `written`, every row is in Postgres and the segments go, else they stay for another process to insert. */
  close(written: boolean): void;
};

/** A process that has not touched its heartbeat for this long is dead. */
export const STALE_MS = 60_000;
/** How often a process touches its heartbeat. */
export const HEARTBEAT_MS = 5_000;
/** How often a running process looks for rows dead processes left (besides once as it starts). */
export const JOURNAL_RECOVERY_MS = 30_000;
/** A row journal starts a new segment at most this often. */
export const SEGMENT_MS = 1_000;

/** This process's id in journal file names: its pid, its start and a random part. */
const PROCESS_ID = `${process.pid}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;

function alive(processId: string, dir: string): boolean {
  if (processId === PROCESS_ID) return true;
  const file = path.join(dir, `${processId}.alive`);
  let host: string;
  let touched: number;
  try {
    host = fs.readFileSync(file, 'utf8');
    touched = fs.statSync(file).mtimeMs;
  } catch {
    return false;
  }
  if (host !== os.hostname()) return Date.now() - touched < STALE_MS;
  const pid = Number(processId.split('-')[0]);
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

let heartbeats: Set<string> | null = null;

/** Touches this process's heartbeat in `dir` every HEARTBEAT_MS (one timer for all journals). */
function beat(dir: string): void {
  const file = path.join(dir, `${PROCESS_ID}.alive`);
  fs.writeFileSync(file, os.hostname());
  if (!heartbeats) {
    heartbeats = new Set();
    const timer = setInterval(() => {
      const now = new Date();
      for (const f of heartbeats!) fs.utimes(f, now, now, () => undefined);
    }, HEARTBEAT_MS);
    timer.unref();
  }
  heartbeats.add(file);
}

export type Orphan = { file: string; records: string[]; remove(): void };

/** The segments of `name` that dead processes left in `dir`, with their lines; heartbeats of dead processes with nothing left go. */
function orphansOf(dir: string, name: string): Orphan[] {
  const found: Orphan[] = [];
  const prefix = `${name}.`;
  const files = fs.readdirSync(dir);
  for (const file of files) {
    if (!file.endsWith('.alive')) continue;
    const owner = file.slice(0, -'.alive'.length);
    if (!alive(owner, dir) && !files.some((f) => f.includes(`.${owner}.`))) fs.rmSync(path.join(dir, file), { force: true });
  }
  for (const file of files) {
    if (!file.startsWith(prefix) || !file.endsWith('.jsonl')) continue;
    const owner = file.slice(prefix.length).split('.')[0]!;
    if (alive(owner, dir)) continue;
    const full = path.join(dir, file);
    const records = fs.readFileSync(full, 'utf8').split('\n').filter(Boolean);
    found.push({ file: full, records, remove: () => fs.rmSync(full, { force: true }) });
  }
  return found;
}

/** Appends lines to a file once per turn of the event loop, in one write. */
function lineWriter(fd: () => number) {
  let pending = '';
  let scheduled = false;
  const writeOut = () => {
    scheduled = false;
    if (!pending) return;
    const text = pending;
    pending = '';
    fs.writeSync(fd(), text);
  };
  return {
    append(line: string) {
      pending += `${line}\n`;
      if (!scheduled) {
        scheduled = true;
        setImmediate(writeOut);
      }
    },
    writeOut,
  };
}

/** A journal's segment files: `<name>.<process>.<instance>.<n>.jsonl` in `dir`. */
function segmentFiles(dir: string, name: string) {
  fs.mkdirSync(dir, { recursive: true });
  beat(dir);
  // Several journals of one name may live in one process (tests start several APIs in one).
  const instance = randomBytes(3).toString('hex');
  return (n: number) => path.join(dir, `${name}.${PROCESS_ID}.${instance}.${n}.jsonl`);
}

export function createRowJournal(dir: string, name: string): RowJournal {
  const fileOf = segmentFiles(dir, name);
  let seq = 0;
  let startedAt = Date.now();
  let fd = fs.openSync(fileOf(seq), 'a');
  const open: number[] = [seq];
  const lines = lineWriter(() => fd);
  return {
    append: lines.append,
    cut() {
      if (Date.now() - startedAt < SEGMENT_MS) return seq - 1;
      lines.writeOut();
      fs.closeSync(fd);
      const last = seq;
      seq += 1;
      startedAt = Date.now();
      fd = fs.openSync(fileOf(seq), 'a');
      open.push(seq);
      return last;
    },
    release(upTo) {
      while (open.length > 1 && open[0]! <= upTo) fs.unlink(fileOf(open.shift()!), () => undefined);
    },
    orphans: () => orphansOf(dir, name),
    close(written) {
      lines.writeOut();
      fs.closeSync(fd);
      if (written) for (const n of open) fs.rmSync(fileOf(n), { force: true });
    },
  };
}

/**
 * Rows that are owed if this process dies before it says otherwise: a call in flight that
 * nothing else would record (a key without a blocking limit holds nothing in Redis), written as
 * the ledger row of its worst case under the id its settle will use. `open` appends the row;
 * the closer it answers appends `-<id>` (the call settled, with its own row, or cost nothing).
 * Recovery inserts the rows of a dead process that were never closed, `on conflict do nothing`
 * after the row journal's, so a settled row already in Postgres wins. A segment goes once every
 * row in it is closed and a newer one has started (every `PENDING_SEGMENT_MS`).
 */
export type PendingRowJournal = {
  open(id: string, record: string): () => void;
  /** The dead processes' rows never closed, by segment. */
  orphans(): Orphan[];
  close(): void;
};

/** A pending journal starts a new segment this often, so old ones can go. */
export const PENDING_SEGMENT_MS = 5_000;

export function createPendingRowJournal(dir: string, name: string): PendingRowJournal {
  const fileOf = segmentFiles(dir, name);
  let seq = 0;
  let startedAt = Date.now();
  let fd = fs.openSync(fileOf(seq), 'a');
  /** Rows still open, by segment. */
  const openIn = new Map<number, number>([[seq, 0]]);
  const lines = lineWriter(() => fd);
  const removeClosed = () => {
    for (const [n, count] of openIn) {
      if (n !== seq && count === 0) {
        openIn.delete(n);
        fs.unlink(fileOf(n), () => undefined);
      }
    }
  };
  return {
    open(id, record) {
      if (Date.now() - startedAt >= PENDING_SEGMENT_MS) {
        lines.writeOut();
        fs.closeSync(fd);
        seq += 1;
        startedAt = Date.now();
        fd = fs.openSync(fileOf(seq), 'a');
        openIn.set(seq, 0);
        removeClosed();
      }
      const segment = seq;
      openIn.set(segment, openIn.get(segment)! + 1);
      lines.append(record);
      let closed = false;
      return () => {
        if (closed) return;
        closed = true;
        // The close is written to the segment being written now: recovery reads a dead process's segments together.
        lines.append(`-${id}`);
        openIn.set(segment, openIn.get(segment)! - 1);
        if (segment !== seq && openIn.get(segment) === 0) removeClosed();
      };
    },
    orphans() {
      // Closes may sit in a later segment than their rows: read a dead process's segments together.
      const orphans = orphansOf(dir, name);
      const closedIds = new Set(orphans.flatMap((o) => o.records.filter((r) => r.startsWith('-')).map((r) => r.slice(1))));
      return orphans.map((o) => ({ ...o, records: o.records.filter((r) => !r.startsWith('-') && !closedIds.has((JSON.parse(r) as { id?: string }).id ?? '')) }));
    },
    /** Rows still open stay, for the next process to insert; with none open the segments go. */
    close() {
      lines.writeOut();
      fs.closeSync(fd);
      if ([...openIn.values()].every((count) => count === 0)) for (const n of openIn.keys()) fs.rmSync(fileOf(n), { force: true });
    },
  };
}
