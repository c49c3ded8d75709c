import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DataDirLockedError, lockDataDir, lockFilePath } from '../../scripts/lib/data-dir-lock';

/** `npm start`'s lock on GW_DATA_DIR: exclusive, naming its holder, taken over when stale. */
describe('data folder lock', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-lock-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A pid that ran and has exited. */
  function deadPid(): number {
    const ran = spawnSync(process.execPath, ['-e', '']);
    return ran.pid!;
  }

  it('writes its pid, and releases only its own lock', () => {
    const lock = lockDataDir(dir);
    expect(fs.readFileSync(lockFilePath(dir), 'utf8').trim()).toBe(String(process.pid));
    lock.release();
    expect(fs.existsSync(lockFilePath(dir))).toBe(false);

    const again = lockDataDir(dir);
    fs.writeFileSync(lockFilePath(dir), `${process.ppid}\n`);
    again.release();
    expect(fs.readFileSync(lockFilePath(dir), 'utf8').trim()).toBe(String(process.ppid));
  });

  it('refuses while a running process holds it, naming that pid', () => {
    // The Jest worker's parent runs for the whole test: a live holder other than us.
    fs.writeFileSync(lockFilePath(dir), `${process.ppid}\n`);
    let thrown: unknown;
    try {
      lockDataDir(dir);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(DataDirLockedError);
    expect((thrown as DataDirLockedError).pid).toBe(process.ppid);
    expect((thrown as Error).message).toContain(`pid ${process.ppid}`);
    expect((thrown as Error).message).not.toContain('\n');
    expect(fs.readFileSync(lockFilePath(dir), 'utf8').trim()).toBe(String(process.ppid));
  });

  it('takes over a lock whose process is gone', () => {
    const gone = deadPid();
    fs.writeFileSync(lockFilePath(dir), `${gone}\n`);
    const lock = lockDataDir(dir);
    expect(fs.readFileSync(lockFilePath(dir), 'utf8').trim()).toBe(String(process.pid));
    lock.release();
  });

  it('takes over an old lock that names no pid, and waits out a fresh one', () => {
    fs.writeFileSync(lockFilePath(dir), '');
    expect(() => lockDataDir(dir)).toThrow(/being locked by another npm start/);
    const old = new Date(Date.now() - 60_000);
    fs.utimesSync(lockFilePath(dir), old, old);
    lockDataDir(dir).release();
  });

  it('a second lock in the same folder for another pid refuses', () => {
    const first = lockDataDir(dir);
    expect(() => lockDataDir(dir, process.ppid)).toThrow(DataDirLockedError);
    first.release();
  });
});
