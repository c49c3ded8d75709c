import { Client, Connection } from '@temporalio/client';
import { taskQueue, workflowIds } from '../../workflows/definitions';
import { probeWorkflow } from '../../workflows';
import { startTestWorkers, uniquePrefix } from '../helpers/harness';
import { saveHistory } from '../helpers/histories';
import { testTemporalClient } from '../helpers/sealing-keys';

/** The durable path end to end on the dev server: client -> workflow -> activity -> result. */
describe('probeWorkflow round trip', () => {
  const prefix = uniquePrefix('probe');
  let workers: Awaited<ReturnType<typeof startTestWorkers>>;
  let connection: Connection;
  let client: Client;

  beforeAll(async () => {
    workers = await startTestWorkers(['jobs', 'webhooks', 'maintenance'], prefix);
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    client = testTemporalClient(connection);
  });
  afterAll(async () => {
    await workers.shutdown();
    await connection.close();
  });

  it.each(['jobs', 'webhooks', 'maintenance'] as const)('runs on the %s queue and is answered by its worker', async (name) => {
    const queue = taskQueue(name, prefix);
    const result = await client.workflow.execute(probeWorkflow, {
      taskQueue: queue,
      workflowId: workflowIds.probe(`${prefix}${name}`),
      args: [{ message: `hello ${name}` }],
    });
    expect(result).toEqual({ message: `hello ${name}`, handledBy: queue });
    const history = await client.workflow.getHandle(workflowIds.probe(`${prefix}${name}`)).fetchHistory();
    await saveHistory(`probe-${name}`, workflowIds.probe(`${prefix}${name}`));
    const activityScheduled = history.events?.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'echo');
    expect(activityScheduled).toBe(true);
  });
});
