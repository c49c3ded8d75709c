import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { quietBundlerLogger } from '../../workers/queues';
import { installTemporalRuntime } from '../../workers/temporal';
import { HISTORIES_DIR } from '../helpers/histories';
import { testDataConverter } from '../helpers/sealing-keys';
import { workflowSpanSink } from '../../workers/temporal';

/**
 * Determinism guard for `videoJob`: committed histories must replay against today's workflow
 * code (test/replay/histories-replay.test.ts replays every committed history; this file keeps
 * the proof that a breaking change is caught). Recorded on today's branches:
 */
const HISTORIES = ['succeeded-await-render', 'failed-await-render', 'timed-out', 'canceled-await-render', 'canceled-during-submit-update', 'canceled-recorded-in-postgres'];
/**
 * Frozen, never re-recorded: runs from before a cancel interrupted the call in flight, and
 * before status checks rode the activity retry policy (issue 34). They replay only because each
 * change is `patched()`.
 */
const PRE_PATCH_HISTORIES = ['canceled-before-interrupt', 'succeeded', 'canceled', 'failed', 'canceled-during-submit'];
const historyOf = (name: string) => JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, `video-job-${name}.json`), 'utf8')) as unknown;

describe('videoJob replay', () => {
  beforeAll(() => {
    try {
      // The refused replays log their nondeterminism at WARN; the assertions say it already.
      installTemporalRuntime('error');
    } catch {
      // A runtime is already installed in this Jest worker.
    }
  });

  it.each(HISTORIES)('replays the recorded %s history', async (name) => {
    await Worker.runReplayHistory({ workflowBundle: { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! }, dataConverter: testDataConverter(), sinks: workflowSpanSink() }, historyOf(name), `replay-${name}`);
  });

  it.each(PRE_PATCH_HISTORIES)('replays the %s history recorded before a workflow change, through its patch', async (name) => {
    await Worker.runReplayHistory({ workflowBundle: { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! }, dataConverter: testDataConverter(), sinks: workflowSpanSink() }, historyOf(name), `replay-${name}`);
  });

  it('refuses a workflow changed in a way that breaks determinism', async () => {
    const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('./changed-workflows'), logger: quietBundlerLogger });
    for (const name of [...HISTORIES, ...PRE_PATCH_HISTORIES]) {
      await expect(Worker.runReplayHistory({ workflowBundle: { code }, dataConverter: testDataConverter(), sinks: workflowSpanSink() }, historyOf(name), `changed-${name}`)).rejects.toBeInstanceOf(DeterminismViolationError);
    }
  });
});
