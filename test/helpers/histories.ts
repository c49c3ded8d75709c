import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';

export const HISTORIES_DIR = path.join(__dirname, '..', 'replay', 'histories');

/**
 * With GW_RECORD_HISTORIES=1, saves a finished workflow's history for the replay tests. Run
 * `GW_RECORD_HISTORIES=1 npm test -- test/workflows/video-jobs.test.ts` after a deliberate
 * workflow change, review, and commit the files.
 */
export async function saveHistory(name: string, client: Client, workflowId: string): Promise<void> {
  if (process.env.GW_RECORD_HISTORIES !== '1') return;
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  fs.writeFileSync(path.join(HISTORIES_DIR, `video-job-${name}.json`), JSON.stringify(history, null, 1));
}
