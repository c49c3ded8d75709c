import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';

export const HISTORIES_DIR = path.join(__dirname, '..', 'replay', 'histories');

/**
 * With GW_RECORD_HISTORIES=1, saves a finished workflow's history for the replay tests, in
 * the JSON the Temporal CLI writes. After a deliberate workflow change run
 * `GW_RECORD_HISTORIES=1 npm test -- test/workflows/video-jobs.test.ts`, review, commit.
 */
export async function saveHistory(name: string, workflowId: string): Promise<void> {
  if (process.env.GW_RECORD_HISTORIES !== '1') return;
  const json = execFileSync(resolveTemporalCli(), ['workflow', 'show', '--workflow-id', workflowId, '--output', 'json', '--address', process.env.TEMPORAL_ADDRESS!], { encoding: 'utf8' });
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  fs.writeFileSync(path.join(HISTORIES_DIR, `video-job-${name}.json`), json);
}
