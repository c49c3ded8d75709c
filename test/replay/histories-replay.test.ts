import fs from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import * as workflows from '../../workflows';
import { installTemporalRuntime } from '../../workers/temporal';
import { HISTORIES_DIR } from '../helpers/histories';
import { testDataConverter } from '../helpers/sealing-keys';
import { workflowSpanSink } from '../../workers/temporal';

/**
 * The deploy guard (issue 34): every committed history replays against today's workflow code.
 * Histories are recorded from the tests with GW_RECORD_HISTORIES=1 and never overwritten
 * (test/helpers/histories.ts), so those recorded before a change stand for runs still open
 * when it is deployed: they replay only through the change's `patched()` branch. A change that
 * breaks one fails here; `npm run replay` runs the same check on histories fetched from a
 * running Temporal.
 */
const files = fs.readdirSync(HISTORIES_DIR).filter((f) => f.endsWith('.json')).sort();
const workflowTypeOf = (file: string) => {
  const history = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8')) as { events: Array<{ workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } }> };
  return history.events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? 'unknown';
};

describe('committed workflow histories', () => {
  beforeAll(() => {
    try {
      installTemporalRuntime('error');
    } catch {
      // A runtime is already installed in this Jest worker.
    }
  });

  it.each(files)('replays %s', async (file) => {
    const history = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, file), 'utf8')) as unknown;
    await Worker.runReplayHistory({ workflowBundle: { codePath: process.env.GW_TEST_WORKFLOW_BUNDLE! }, dataConverter: testDataConverter(), sinks: workflowSpanSink() }, history, `replay-${file}`);
  });

  it('has a history of every workflow type the workers register', () => {
    const recorded = new Set(files.map(workflowTypeOf));
    const missing = Object.keys(workflows).filter((type) => !recorded.has(type));
    expect(missing).toEqual([]);
  });
});
