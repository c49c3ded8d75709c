import { Connection } from '@temporalio/client';
import { refusedServerVersion } from '../../workers/temporal';

/** Workers refuse, in one line at start, a Temporal server older than 1.25 (issue 55, item 8). */
describe('the Temporal server version a worker accepts', () => {
  it('accepts 1.25 and later, refuses older or unstated versions in one line', () => {
    for (const ok of ['1.25.0', '1.29.1', 'v1.30.0', '2.0.0']) expect(refusedServerVersion(ok)).toBeNull();
    for (const old of ['1.24.2', '1.9.99', '0.30.0']) expect(refusedServerVersion(old)).toMatch(/^the Temporal server is \d+\.\d+\.\d+; the workers need 1\.25\.0 or later/);
    expect(refusedServerVersion('')).toMatch(/did not say its version/);
    for (const line of [refusedServerVersion('1.20.0'), refusedServerVersion('')]) expect(line).not.toContain('\n');
  });

  it('the server the tests run on states a version it accepts', async () => {
    const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    try {
      const { serverVersion } = await connection.workflowService.getSystemInfo({});
      expect(refusedServerVersion(serverVersion ?? '')).toBeNull();
    } finally {
      await connection.close();
    }
  });
});
