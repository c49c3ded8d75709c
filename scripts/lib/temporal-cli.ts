import { execFileSync } from 'node:child_process';
import path from 'node:path';

/**
 * The Temporal CLI's path, as `scripts/setup` decides it (TEMPORAL_CLI_PATH, the pinned build,
 * or PATH); setup builds it on first use and prints progress on stderr.
 */
export function resolveTemporalCli(): string {
  if (process.env.TEMPORAL_CLI_PATH) return process.env.TEMPORAL_CLI_PATH;
  const setup = path.resolve(__dirname, '../setup');
  const out = execFileSync('bash', [setup], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const cli = out.trim().split('\n').pop();
  if (!cli) throw new Error('scripts/setup printed no Temporal CLI path');
  process.env.TEMPORAL_CLI_PATH = cli;
  return cli;
}
