/**
 * The API's side of Temporal: a client and the readiness probe. Only `@temporalio/client` here;
 * the worker SDK (native core bridge, workflow bundler) stays in `workers/`, which the API never
 * loads.
 */
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/**
 * Calls the client retries on UNAVAILABLE and the like: 6 attempts over about 3 s (the SDK's
 * default is 10 over about 20 s), so a request meeting a Temporal outage answers 503 soon.
 */
export const TEMPORAL_CALL_ATTEMPTS = 6;

/**
 * A client for the API. Reconnecting after an outage backs off to at most 2 s (gRPC's default
 * grows to 2 minutes), so requests work again soon after the server is back.
 */
export async function connectClient(address: string, namespace: string): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({
    address,
    interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: TEMPORAL_CALL_ATTEMPTS }))],
    channelArgs: { 'grpc.initial_reconnect_backoff_ms': 250, 'grpc.max_reconnect_backoff_ms': 2_000 },
  });
  // Connecting ran the check call inside the connection's AsyncLocalStorage (`withDeadline`), and
  // in Node 20 a storage once run keeps promise hooks on for every promise of the process: about
  // 2% of the API's CPU and an object per promise, on requests that never touch Temporal. The
  // store is empty again now; a later `withDeadline` (none of ours) would turn it back on.
  connection.callContextStorage.disable();
  return { client: new Client({ connection, namespace }), close: () => connection.close() };
}

/** Readiness: a queue is served when some worker has polled it recently. */
export async function queueHasPollers(client: Client, taskQueue: string): Promise<boolean> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (response.pollers ?? []).length > 0;
}
