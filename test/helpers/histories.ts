import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';

export const HISTORIES_DIR = path.join(__dirname, '..', 'replay', 'histories');

/**
 * With GW_RECORD_HISTORIES=1, saves a finished workflow's history for the replay tests
 * (test/replay/), in the JSON the Temporal CLI writes, as `<name>.json`. A kept history is never
 * overwritten: it stands for runs that may still be open somewhere, which the workflow code must
 * go on replaying. After a deliberate workflow change (behind `patched()`), record the new
 * branch under a new name: `GW_RECORD_HISTORIES=1 npm test -- <the test file>`, review, commit.
 */
export async function saveHistory(name: string, workflowId: string, runId?: string): Promise<void> {
  if (process.env.GW_RECORD_HISTORIES !== '1') return;
  const file = path.join(HISTORIES_DIR, `${name}.json`);
  if (fs.existsSync(file)) return;
  const json = execFileSync(resolveTemporalCli(), ['workflow', 'show', '--workflow-id', workflowId, ...(runId ? ['--run-id', runId] : []), '--output', 'json', '--address', process.env.TEMPORAL_ADDRESS!], { encoding: 'utf8' });
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  fs.writeFileSync(file, json);
}
