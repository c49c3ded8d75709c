import Koa from 'koa';
import { unsubscribeRouter } from './unsubscribe';
import type { AuthFailureLimiter } from '../core/auth/auth-failure-limiter';
import type { KeyResolver } from '../core/auth/gateway-key-auth';
import type { Clock } from '../core/clock';
import type { Config } from '../core/config';
import type { Database } from '../core/db/client';
import type { Logger } from '../core/logger';
import type { RedisHandle } from '../core/redis';
import type { GatewayState } from './context';
import { consoleRouter, consoleStatic } from './console';
import { filesRouter } from './files';
import { gatewayNotFound, gatewayPreAuthMeter, gatewayRouter } from './gateway/router';
import { gatewayDocsRouter } from './gateway/openapi';
import type { GatewayServices } from './gateway/services';
import { healthRouter, type HealthChecks } from './health';
import { managementRouter } from './manage/router';
import type { ManagementServices } from './manage/services';
import { bodyLimit } from './middleware/body';
import { errorHandler } from './middleware/error-handler';
import { requestContext, type HttpRequestObserver } from './middleware/request-context';
import { requestTracing } from './middleware/tracing';
import { temporalCodecRouter, type TemporalCodecDeps } from './temporal-codec';

export type AppDeps = {
  config: Pick<Config, 'GW_TRUST_PROXY'>;
  db: Database;
  redis: RedisHandle;
  /**
   * Where spend counters and key rate windows live: SPEND_REDIS_URL's Redis, else the one
   * Redis. It must never evict (core/spend/spend-redis.ts); the other may (cached answers).
   */
  spendRedis: RedisHandle;
  keys: KeyResolver;
  authFailures: AuthFailureLimiter;
  clock: Clock;
  logger: Logger;
  /** `/readyz` and `/healthz/deep` (api/health.ts). */
  readiness: HealthChecks;
  manage: ManagementServices;
  gateway: GatewayServices;
  /** The Temporal codec endpoint's codec, cookie sealer and who may call it (api/temporal-codec.ts). */
  temporalCodec: Omit<TemporalCodecDeps, 'db' | 'clock' | 'authFailures'>;
  /** With metrics on: each request's duration, for `http_server_request_duration_seconds`. */
  httpMetrics?: HttpRequestObserver;
};

/** Builds the HTTP application from its dependencies; listening is the caller's business. */
export function createApp(deps: AppDeps): Koa<GatewayState> {
  const app = new Koa<GatewayState>({ proxy: deps.config.GW_TRUST_PROXY });
  // Errors are rendered by errorHandler; Koa's own logging of them would duplicate it.
  app.silent = true;

  const routers = [
    healthRouter(deps.readiness),
    // Before the gateway's routes: the gateway's OpenAPI document needs no key.
    gatewayDocsRouter(),
    gatewayRouter(deps),
    managementRouter(deps),
    consoleRouter(),
    filesRouter({ db: deps.db, clock: deps.clock, signer: deps.gateway.jobs.links.signer, storage: deps.gateway.storage }),
    unsubscribeRouter({ db: deps.db, key: deps.manage.unsubscribeKey }),
    temporalCodecRouter({ ...deps.temporalCodec, db: deps.db, clock: deps.clock, authFailures: deps.authFailures }),
  ];

  // Traces exported: a server span per request, begun and ended by the request context, outside
  // the error handler. Otherwise the request context adopts a caller's trace id.
  app.use(requestContext(deps.logger, { tracer: requestTracing(), http: deps.httpMetrics }));
  app.use(errorHandler());
  const meterDeps = { keys: deps.keys, clock: deps.clock, redis: deps.spendRedis };
  app.use(bodyLimit({ beforeRefusal: gatewayPreAuthMeter(meterDeps) }));
  for (const router of routers) app.use(router.routes());
  app.use(consoleStatic());
  app.use(gatewayNotFound(meterDeps));
  return app;
}
