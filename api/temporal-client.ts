/**
 * The API's side of Temporal: a client and the readiness probe. Only `@temporalio/client` here;
 * the worker SDK (native core bridge, workflow bundler) stays in `workers/`, which the API never
 * loads.
 */
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import { temporal } from '@temporalio/proto';
import { processTracer } from '../core/observability/tracing';

/**
 * Calls the client retries on UNAVAILABLE and the like: 6 attempts over about 3 s (the SDK's
 * default is 10 over about 20 s), so a request meeting a Temporal outage answers 503 soon.
 */
export const TEMPORAL_CALL_ATTEMPTS = 6;

/**
 * A client for the API, connected lazily (issue 55): the API starts, and chat serves, while
 * Temporal is unreachable; the calls that need it (video submit and cancel, rotations) answer
 * 503 within their deadline until it is back. Reconnecting after an outage backs off to at
 * most 2 s (gRPC's default grows to 2 minutes), so requests work again soon after.
 */
export function connectClient(address: string, namespace: string, dataConverter?: DataConverter): { client: Client; close(): Promise<void> } {
  const connection = Connection.lazy({
    address,
    interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: TEMPORAL_CALL_ATTEMPTS }))],
    channelArgs: { 'grpc.initial_reconnect_backoff_ms': 250, 'grpc.max_reconnect_backoff_ms': 2_000 },
  });
  return { client: new Client({ connection, namespace, dataConverter, interceptors: tracingClientInterceptors() }), close: () => connection.close() };
}

/**
 * With traces on, starting a workflow (a video job, a webhook delivery) is a span of the request
 * or activity that starts it, and its context rides in the workflow's headers: the workflow's
 * and its activities' spans join the same trace (`@temporalio/interceptors-opentelemetry`).
 */
export function tracingClientInterceptors(): { workflow: OpenTelemetryWorkflowClientInterceptor[] } | undefined {
  const tracer = processTracer();
  return tracer ? { workflow: [new OpenTelemetryWorkflowClientInterceptor({ tracer })] } : undefined;
}

/** Readiness: a queue is served when some worker has polled it recently. */
export async function queueHasPollers(client: Client, taskQueue: string, kind: 'workflow' | 'activity' = 'workflow'): Promise<boolean> {
  const { TaskQueueType } = temporal.api.enums.v1;
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: kind === 'workflow' ? TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW : TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
  });
  return (response.pollers ?? []).length > 0;
}

/**
 * How long a Temporal call on a request path may take, retries included: a Temporal server that
 * is silent (paused, or cut off by a network partition) rather than refusing would otherwise hold
 * the request forever. The request then answers 503 with Retry-After (core/transient.ts).
 */
export const TEMPORAL_REQUEST_DEADLINE_MS = 4_000;

/** Calls inside `withTemporalDeadline` now; see there. */
let callsWithDeadline = 0;

/**
 * Runs `fn`'s Temporal calls with a gRPC deadline (DEADLINE_EXCEEDED after `ms`). The SDK
 * carries the deadline in an AsyncLocalStorage, which in Node 20 turns promise hooks on for the
 * whole process once run (see connectClient); it is disabled again whenever no such call is in
 * flight, so chat requests do not pay for a video request's deadline.
 */
export async function withTemporalDeadline<T>(client: Client, fn: () => Promise<T>, ms = TEMPORAL_REQUEST_DEADLINE_MS): Promise<T> {
  const connection = client.connection as Connection;
  callsWithDeadline++;
  try {
    return await connection.withDeadline(Date.now() + ms, fn);
  } finally {
    if (--callsWithDeadline === 0) connection.callContextStorage.disable();
  }
}
