/** What the bench reads from /proc: CPU time and RSS of a process, and who listens on a port. */
import fs from 'node:fs';

/** Kernel clock ticks per second for utime/stime (`getconf CLK_TCK`; 100 on Linux). */
const TICKS_PER_SECOND = 100;

type Stat = { ppid: number; utime: number; stime: number; cutime: number; cstime: number };

function stat(pid: number): Stat | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: fields start after the last `)`.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), utime: Number(f[11]), stime: Number(f[12]), cutime: Number(f[13]), cstime: Number(f[14]) };
  } catch {
    return null;
  }
}

function allPids(): number[] {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number);
}

/**
 * CPU seconds (user + system) of the process, and with `tree` of its direct children too plus
 * the children it has reaped (PostgreSQL's backends are children of the postmaster).
 */
export function cpuSeconds(pid: number, tree = false): number {
  const own = stat(pid);
  if (!own) return NaN;
  let ticks = own.utime + own.stime;
  if (tree) {
    ticks += own.cutime + own.cstime;
    for (const child of allPids()) {
      const s = stat(child);
      if (s && s.ppid === pid) ticks += s.utime + s.stime;
    }
  }
  return ticks / TICKS_PER_SECOND;
}

/** Resident set size in MB (VmRSS), NaN when the process is gone. */
export function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The pid that listens on a TCP port of this machine, or null (another user's, or none). */
export function pidListeningOn(port: number): number | null {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && f[1]!.endsWith(`:${hexPort}`) && f[3] === '0A') inodes.add(f[9]!);
    }
  }
  if (inodes.size === 0) return null;
  for (const pid of allPids()) {
    let fds: string[] = [];
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m && inodes.has(m[1]!)) return pid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return null;
}

/**
 * CPU seconds of a process split by where they went: its main thread's user and system time,
 * and the rest of its threads (V8's garbage-collection helpers, libuv's pool) together. A
 * process's CPU a request grows with work a main-thread profile does not show.
 */
export function threadCpuSeconds(pid: number): { mainUser: number; mainSystem: number; helpers: number } {
  const out = { mainUser: 0, mainSystem: 0, helpers: 0 };
  let tids: string[] = [];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return { mainUser: NaN, mainSystem: NaN, helpers: NaN };
  }
  for (const tid of tids) {
    try {
      const text = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      const user = Number(f[11]) / TICKS_PER_SECOND;
      const system = Number(f[12]) / TICKS_PER_SECOND;
      if (Number(tid) === pid) {
        out.mainUser += user;
        out.mainSystem += system;
      } else {
        out.helpers += user + system;
      }
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}
