/** Percentiles, number formats and the machine lines every results file carries. */
import { execSync } from 'node:child_process';
import os from 'node:os';
import type { LoadTool } from './load';
import { ROOT } from './processes';
import type { Services } from './services';

/** The nearest-rank percentile; NaN for no values. */
export function pct(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** The median: the middle value, or the mean of the two middle ones for an even count (the nearest rank would take the lower). */
export function median(values: number[]): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export const f0 = (n: number) => (Number.isNaN(n) ? 'n/a' : n.toFixed(0));
export const f1 = (n: number) => (Number.isNaN(n) ? 'n/a' : n.toFixed(1));
export const f2 = (n: number) => (Number.isNaN(n) ? 'n/a' : n.toFixed(2));
export const signed = (n: number) => (Number.isNaN(n) ? 'n/a' : `${n >= 0 ? '+' : ''}${n.toFixed(2)}`);

/** A command's output in the repository, or `?`. */
export function sh(cmd: string): string {
  try {
    return execSync(cmd, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '?';
  }
}

/** The commit measured, the machine and its load, Node and the load generator, the services. */
export function machineLines(tool: LoadTool, svc: Services, load0: number[]): string[] {
  const cpu = os.cpus();
  const dirty = sh('git status --porcelain -- api core package.json').length > 0;
  return [
    `- commit measured: ${sh('git rev-parse --short HEAD')} (${sh('git log -1 --format=%s').slice(0, 100)})${dirty ? '; api/, core/ or package.json had uncommitted changes in the working tree' : ''}`,
    `- machine: ${cpu.length} × ${cpu[0]?.model ?? '?'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GB RAM, ${os.type()} ${os.release()}; load average before the run ${load0.map((l) => l.toFixed(2)).join(' ')}, after it ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (above 2 means other work shared the two cores)`,
    `- Node ${process.version}; load generator ${tool.version} (one thread, one connection per unit of concurrency, no pipelining)`,
    `- services: ${svc.source}; Postgres pid ${svc.postgresPid ?? 'unknown'}, Redis pid ${svc.redisPid ?? 'unknown'}`,
  ];
}
