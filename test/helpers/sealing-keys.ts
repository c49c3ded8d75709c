import { Client, type Connection } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { sealingDataConverter } from '../../core/crypto/payload-codec';

/**
 * The tests' sealing keyring, fixed: Temporal payloads are sealed with it, so the histories tests
 * record (test/replay/histories) open in every later run. A test key, never a deployment's.
 */
export const TEST_SEALING_KEYS = '1:8C9iC8JENK0a44EIbo/F0DL2o5h6iiUd+2XxEI3QVPI=';

/** The data converter every test client and replay uses: payloads sealed as the gateway seals them. */
export const testDataConverter = () => sealingDataConverter(process.env.GW_SEALING_KEYS ?? TEST_SEALING_KEYS);

/** A Temporal client as the gateway's own: it reads the sealed results of workflows. */
export function testTemporalClient(connection: Connection | NativeConnection, namespace = 'default'): Client {
  return new Client({ connection, namespace, dataConverter: testDataConverter() });
}
