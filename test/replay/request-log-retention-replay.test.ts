import fs from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { installTemporalRuntime } from '../../workers/temporal';
import { HISTORIES_DIR } from '../helpers/histories';
import { testDataConverter } from '../helpers/sealing-keys';
import { workflowSpanSink } from '../../workers/temporal';

/**
 * Determinism guard for `requestLogRetention`: a run recorded before the workflow also deleted
 * media files (frozen, never re-recorded) must replay against today's code. It does only because
 * the new step is `patched()` (`media-files-retention`): unguarded, the new code would schedule
 * the deletion where the recorded run completed.
 */
const FROZEN = ['before-media-files'];

describe('requestLogRetention replay', () => {
  beforeAll(() => {
    try {
      installTemporalRuntime('error');
    } catch {
      // A runtime is already installed in this Jest worker.
    }
  });

  it.each(FROZEN)('replays the %s history through its patch', async (name) => {
    const history = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, `request-log-retention-${name}.json`), 'utf8')) as unknown;
    await Worker.runReplayHistory({ workflowBundle: { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! }, dataConverter: testDataConverter(), sinks: workflowSpanSink() }, history, `replay-retention-${name}`);
  });
});
