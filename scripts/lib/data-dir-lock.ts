import fs from 'node:fs';
import path from 'node:path';

/**
 * One `npm start` per GW_DATA_DIR: two would run two Temporal dev servers on one SQLite file
 * and two PostgreSQL servers on one data folder, and both break. The lock is a file created
 * exclusively (`wx`) holding the launcher's pid; a lock whose pid no longer runs is stale (the
 * launcher was killed) and is taken over.
 */
export const LOCK_FILE = 'gw.lock';

/** A lock file still empty this long after it was made belongs to a launcher that died writing it. */
const EMPTY_LOCK_GRACE_MS = 10_000;

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`${dataDir} is in use by another npm start (pid ${pid}); stop that one, or set GW_DATA_DIR to another folder`);
    this.name = 'DataDirLockedError';
  }
}

export type DataDirLock = { file: string; pid: number; release(): void };

export function lockFilePath(dataDir: string): string {
  return path.join(dataDir, LOCK_FILE);
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The pid a lock file names, null when it names none (being written, or damaged). */
function readHolder(file: string): { pid: number | null; ageMs: number } | 'gone' {
  try {
    const text = fs.readFileSync(file, 'utf8').trim();
    const ageMs = Date.now() - fs.statSync(file).mtimeMs;
    const pid = /^\d+$/.test(text) ? Number(text) : null;
    return { pid, ageMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    throw err;
  }
}

/**
 * Takes the data folder's lock for `pid` (this process by default), or throws
 * DataDirLockedError naming the pid that holds it.
 */
export function lockDataDir(dataDir: string, pid: number = process.pid): DataDirLock {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = lockFilePath(dataDir);
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const fd = fs.openSync(file, 'wx', 0o644);
      try {
        fs.writeSync(fd, `${pid}\n`);
      } finally {
        fs.closeSync(fd);
      }
      return {
        file,
        pid,
        release() {
          // Only our own: never a lock a later launcher took over.
          const holder = readHolder(file);
          if (holder !== 'gone' && holder.pid === pid) fs.rmSync(file, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = readHolder(file);
    if (holder === 'gone') continue;
    if (holder.pid !== null && holder.pid !== pid && pidAlive(holder.pid)) throw new DataDirLockedError(dataDir, holder.pid);
    if (holder.pid === null && holder.ageMs < EMPTY_LOCK_GRACE_MS) {
      throw new Error(`${dataDir} is being locked by another npm start just now (${file}); try again in a few seconds`);
    }
    // Stale: its launcher is gone (or it is our own pid, left by a crash before a restart).
    fs.rmSync(file, { force: true });
  }
  throw new Error(`could not lock ${dataDir}: ${file} keeps changing`);
}
