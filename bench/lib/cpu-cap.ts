/**
 * A CPU share for one process, by a cgroup of its own (bench:scale-out's `BENCH_SCALE_CPU`).
 *
 * On the two-core machine, 2 or 4 API processes share the cores with wrk, the mock upstream,
 * Postgres and Redis: the machine is saturated before the processes are, so adding one shows
 * only the oversubscription (bench/results/2026-11-27-issue-37-leases.md, runs F-H). With each
 * API process held to the same fraction of a core, as if each had a machine of its own, what
 * the shared parts (one Redis, one Postgres, the leases) allow is what remains to be seen: N
 * processes should serve about N times one's requests while the machine has room left.
 *
 * The kernel's CFS bandwidth control does the holding: cgroup v2's `cpu.max`, or v1's
 * `cpu.cfs_quota_us` where the cpu controller is mounted as v1 (as on this machine). Needs root.
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * The scheduler's accounting period (BENCH_SCALE_CPU_PERIOD_US), the kernel's default 100 ms. A
 * shorter one stops a held process more often mid-work: one process held to a quarter of a core
 * spent 780 µs of CPU a request with a 20 ms period, 474 µs with 100 ms, 384 µs unheld
 * (bench/results/2026-11-28-issue-37-scale-out.md).
 */
const PERIOD_US = Number(process.env.BENCH_SCALE_CPU_PERIOD_US ?? 100_000);

type Hierarchy = { root: string; limit(dir: string, quotaUs: number): void };

function hierarchy(): Hierarchy | null {
  const v1 = '/sys/fs/cgroup/cpu';
  if (fs.existsSync(path.join(v1, 'cpu.cfs_quota_us'))) {
    return {
      root: v1,
      limit(dir, quotaUs) {
        fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
        fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
      },
    };
  }
  const v2 = '/sys/fs/cgroup';
  const controllers = path.join(v2, 'cgroup.controllers');
  if (fs.existsSync(controllers) && fs.readFileSync(controllers, 'utf8').split(/\s+/).includes('cpu')) {
    return {
      root: v2,
      limit(dir, quotaUs) {
        fs.writeFileSync(path.join(dir, 'cpu.max'), `${quotaUs} ${PERIOD_US}`);
      },
    };
  }
  return null;
}

/**
 * Holds `pid` (all its threads) to `cores` of CPU time; returns what lets it go again (moved back
 * to the root group, its group removed). Throws with the reason when the machine cannot.
 */
export function capCpu(pid: number, cores: number, name: string): () => void {
  if (!(cores > 0)) throw new Error(`BENCH_SCALE_CPU must be a positive number of cores, not ${cores}`);
  const h = hierarchy();
  if (!h) throw new Error('BENCH_SCALE_CPU needs a cgroup cpu controller (/sys/fs/cgroup/cpu or cgroup v2 with cpu enabled)');
  const dir = path.join(h.root, name);
  try {
    fs.mkdirSync(dir, { recursive: true });
    h.limit(dir, Math.round(cores * PERIOD_US));
    fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
  } catch (err) {
    release(h.root, pid, dir);
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'EACCES' || code === 'EPERM' ? 'it needs root' : `the period is ${PERIOD_US} µs (BENCH_SCALE_CPU_PERIOD_US)`;
    throw new Error(`BENCH_SCALE_CPU: cannot hold process ${pid} in ${dir} (${(err as Error).message}); ${why}`);
  }
  return () => release(h.root, pid, dir);
}

/** Moves `pid` back to the root group and removes its group. */
function release(root: string, pid: number, dir: string): void {
  try {
    fs.writeFileSync(path.join(root, 'cgroup.procs'), String(pid));
  } catch {
    // Gone already, or never moved.
  }
  try {
    fs.rmdirSync(dir);
  } catch {
    // Still busy or gone: the kernel keeps an empty group.
  }
}
