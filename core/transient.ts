/**
 * Our own dependencies (Temporal, Postgres, Redis) can be briefly unavailable: a restart, a
 * failover, a full connection pool. A request that meets one answers 503 `no_available_provider`
 * without a code (spec 7: transient, retry) and a Retry-After, never 500 internal_error. This
 * module recognises such errors and retries an operation through a short outage.
 */
import { GatewayError } from './errors';

/** What a 503 for an unavailable dependency tells the client to wait, in seconds. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 5;
/** How long `withDependencyRetry` keeps trying by default before giving the error up. */
export const DEPENDENCY_RETRY_BUDGET_MS = 3_000;

export type Dependency = 'temporal' | 'postgres' | 'redis' | 'network';

/** gRPC status codes (Temporal's client speaks gRPC). */
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_UNAVAILABLE = 14;

/** Socket errors met while connecting to, or talking with, a service of ours. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'EAI_AGAIN']);
/**
 * PostgreSQL SQLSTATEs meaning "not now": class 08 (connection exception), 57P01..57P03
 * (admin_shutdown, crash_shutdown, cannot_connect_now), 53300 (too_many_connections).
 */
const PG_TRANSIENT_STATES = new Set(['08000', '08001', '08003', '08004', '08006', '57P01', '57P02', '57P03', '53300']);
/** node-postgres and pg-pool say these in words, without a code. */
const PG_MESSAGES = [
  /^Connection terminated/,
  /^timeout exceeded when trying to connect$/,
  /^Client has encountered a connection error and is not queryable$/,
  /^Client was closed and is not queryable$/,
];
/** ioredis, when its connection is down and the command cannot wait any longer. */
const REDIS_MESSAGES = [/^Connection is closed\.?$/, /^Stream isn't writeable and enableOfflineQueue options is false$/, /^Reached the max retries per request limit/];

type Inspectable = { name?: unknown; code?: unknown; message?: unknown; details?: unknown; metadata?: unknown; severity?: unknown; cause?: unknown };

/** The error and its causes, outermost first (drizzle, Temporal's client and undici wrap). */
function chain(err: unknown): Inspectable[] {
  const out: Inspectable[] = [];
  let current: unknown = err;
  while (current && typeof current === 'object' && out.length < 8 && !out.includes(current as Inspectable)) {
    out.push(current as Inspectable);
    current = (current as Inspectable).cause;
  }
  return out;
}

function classifyOne(e: Inspectable): Dependency | null {
  const message = typeof e.message === 'string' ? e.message : '';
  // A gRPC status from Temporal's client: numeric code, string details, metadata.
  if (typeof e.code === 'number' && typeof e.details === 'string' && e.metadata && typeof e.metadata === 'object') {
    return e.code === GRPC_UNAVAILABLE || e.code === GRPC_DEADLINE_EXCEEDED ? 'temporal' : null;
  }
  if (e.name === 'MaxRetriesPerRequestError' || REDIS_MESSAGES.some((re) => re.test(message))) return 'redis';
  if (typeof e.code === 'string') {
    if (PG_TRANSIENT_STATES.has(e.code)) return 'postgres';
    if (SOCKET_CODES.has(e.code)) return 'network';
  }
  if (PG_MESSAGES.some((re) => re.test(message))) return 'postgres';
  return null;
}

/**
 * Which of our dependencies an error says is unavailable, or null when it says something else.
 * A bare socket error is `network`: the provider adapters turn their own connection failures
 * into GatewayErrors, so one that reaches this far came from a service of ours.
 */
export function transientDependency(err: unknown): Dependency | null {
  if (err instanceof GatewayError) return null;
  const links = chain(err);
  // Drizzle wraps a failed query; the driver's error is its cause.
  const isQuery = links.some((e) => e.name === 'DrizzleQueryError' || (typeof e.message === 'string' && e.message.startsWith('Failed query: ')));
  for (const e of links) {
    const found = classifyOne(e);
    if (found) return found === 'network' && isQuery ? 'postgres' : found;
  }
  return null;
}

export function isTransientDependencyError(err: unknown): boolean {
  return transientDependency(err) !== null;
}

/** The answer for a request that met an unavailable dependency: 503, no code, Retry-After. */
export function dependencyUnavailable(cause?: unknown): GatewayError {
  return new GatewayError('dependency_unavailable', 'The gateway could not reach a service it depends on. Retry shortly.', {
    headers: { 'Retry-After': String(DEPENDENCY_RETRY_AFTER_SECONDS) },
    cause,
  });
}

export type DependencyRetryOptions = {
  /** Total time to keep trying, from the first attempt. Default DEPENDENCY_RETRY_BUDGET_MS. */
  budgetMs?: number;
  /** First pause between attempts; doubles each time, capped at 1 s. Default 100 ms. */
  initialDelayMs?: number;
  /** Which errors are worth another attempt. Default isTransientDependencyError. */
  retryIf?: (err: unknown) => boolean;
};

/**
 * Runs `fn`, and again after a short pause while it fails with a transient dependency error,
 * for at most `budgetMs`; then throws the last error (which the error middleware answers as
 * 503 with Retry-After). Only for operations that are safe to repeat: a Temporal
 * `workflow.start` with a fixed workflow id is (a repeat that finds it started fails with
 * WorkflowExecutionAlreadyStartedError instead of starting twice).
 */
export async function withDependencyRetry<T>(fn: () => Promise<T>, options: DependencyRetryOptions = {}): Promise<T> {
  const budgetMs = options.budgetMs ?? DEPENDENCY_RETRY_BUDGET_MS;
  const retryIf = options.retryIf ?? isTransientDependencyError;
  const deadline = Date.now() + budgetMs;
  let delay = options.initialDelayMs ?? 100;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      const left = deadline - Date.now();
      if (!retryIf(err) || left <= 0) throw err;
      await new Promise((r) => setTimeout(r, Math.min(delay, left)));
      delay = Math.min(delay * 2, 1_000);
    }
  }
}
