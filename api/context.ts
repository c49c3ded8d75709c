import type { ParameterizedContext } from 'koa';
import type { KeyContext } from '../core/auth/gateway-key-auth';
import type { ManagementPrincipal } from '../core/auth/management-token-auth';
import type { SpooledMultipart } from '../core/http/multipart';
import type { Logger } from '../core/logger';
import type { RequestTrace } from '../core/observability/tracing';

/** Everything middlewares put on ctx.state, typed in one place. */
export type GatewayState = {
  requestId: string;
  /** The request's trace (api/middleware/tracing.ts): its own when traces are on, else the caller's `traceparent`'s, else unset. */
  traceId?: string;
  /** The request's spans when traces are exported (api/middleware/tracing.ts); passed down explicitly, never through an async context. */
  trace?: RequestTrace;
  /** The request's logger, carrying `logFields`; made on first use (most requests never log but their access line). */
  log: Logger;
  /** Fields every log line of the request carries: `request_id`, then the caller's ids once known. */
  logFields: Record<string, string>;
  /** Largest body this endpoint accepts, decided from the path before anything is read. */
  bodyLimit: number;
  key?: KeyContext;
  principal?: ManagementPrincipal;
  body?: unknown;
  /** A multipart body's fields and spooled files (api/middleware/multipart.ts), for routes that take one. */
  multipart?: SpooledMultipart;
  /**
   * Set when the endpoint counts the key's request itself, in the same Redis step as its spend
   * reservation (chat completions); the rate middleware counts it only if the endpoint did not.
   */
  rateCounted?: boolean;
  /** A batch item run in-process by a worker (api/in-process-gateway.ts): its batch, for the request log. */
  batchId?: string;
};

export type GatewayContext = ParameterizedContext<GatewayState>;
