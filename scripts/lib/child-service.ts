import { spawn } from 'node:child_process';

/** A server this process started and waits on: Prometheus, Jaeger. */
export type ChildService = { stop(): Promise<void> };

/**
 * Starts `binary` and waits until `ready` says it serves (30 s at most). A child that exits
 * first, or never comes up, fails with its last telling line of stderr; stopping sends SIGTERM
 * and waits for the exit.
 */
export async function startChildService(name: string, binary: string, args: string[], ready: () => Promise<boolean>): Promise<ChildService> {
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lastLine = () => {
    const lines = output.trim().split('\n');
    return lines.filter((l) => /error|fatal/i.test(l)).pop() ?? lines.pop() ?? '';
  };
  const deadline = Date.now() + 30_000;
  while (!(await ready().catch(() => false))) {
    if (child.exitCode !== null) throw new Error(`${name} exited: ${lastLine()}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} did not come up within 30 s: ${lastLine()}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
