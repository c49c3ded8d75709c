import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(__dirname, '../..');
const run = promisify(execFile);

/**
 * The API's Temporal client (api/temporal-client.ts) must not leave promise hooks on: in Node 20
 * an AsyncLocalStorage once run keeps them on for every promise of the process, which cost the
 * chat path about 2% of its CPU. Whether they are on shows in a promise reaction's
 * `executionAsyncId()`: 0 without hooks, the promise's own id with them. Checked in a process of
 * its own, since jest's may have hooks on for reasons of its own.
 */
describe('the API Temporal client', () => {
  const probe = `
    const { executionAsyncId } = require('node:async_hooks');
    const { connectClient } = require('./api/temporal-client');
    const reactionId = () => new Promise((resolve) => Promise.resolve().then(() => resolve(executionAsyncId())));
    (async () => {
      const before = await reactionId();
      const { client, close } = await connectClient(process.env.TEMPORAL_ADDRESS, 'default');
      const after = await reactionId();
      // A call still works with the storage off (it reads an empty store).
      await client.workflowService.getSystemInfo({});
      const afterCall = await reactionId();
      await close();
      console.log(JSON.stringify({ before, after, afterCall }));
    })().catch((err) => { console.error(err); process.exit(1); });
  `;

  it('connects, answers calls, and leaves promise hooks off', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '-e', probe], { cwd: ROOT, env: process.env });
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toEqual({ before: 0, after: 0, afterCall: 0 });
  });
});
