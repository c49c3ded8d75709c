import type { Middleware } from 'koa';
import { GATEWAY_KEY_PREFIX, parseBearer } from '../../core/auth/credentials';
import { refuseKey, type KeyContext, type KeyResolver } from '../../core/auth/gateway-key-auth';
import type { Clock } from '../../core/clock';
import { sha256Hex } from '../../core/crypto/secrets';
import { GatewayError } from '../../core/errors';
import { retryAfterSeconds, type WindowCount } from '../../core/ratelimit/fixed-window';
import { countKeyRequest, rateLimitHeaders } from '../../core/ratelimit/key-rate';
import type { RedisHandle } from '../../core/redis';
import { isTransientDependencyError } from '../../core/transient';
import type { GatewayContext, GatewayState } from '../context';

/**
 * Counts the request against its key lineage's per-minute tier (spec 8) and sets
 * `X-RateLimit-*` on the response. Headers set on ctx survive an error thrown later: the error
 * middleware keeps them, so every answer to a known key carries them, refusals included.
 */
export async function meterKey(ctx: GatewayContext, redis: RedisHandle, key: KeyContext): Promise<WindowCount> {
  const window = await countKeyRequest(redis.redis, key);
  ctx.set(rateLimitHeaders(key, window, Date.now()));
  return window;
}

/** 429 `rate_limit_exceeded` with `Retry-After` once the lineage's window is past the tier. */
export function refuseOverRate(key: KeyContext, window: WindowCount): void {
  if (window.count > key.rateLimitRpm) {
    throw new GatewayError('rate_limit_exceeded', `This key may make ${key.rateLimitRpm} requests a minute.`, {
      headers: { 'Retry-After': String(retryAfterSeconds(window)) },
    });
  }
}

/**
 * The key's per-minute tier for a request gatewayAuth has already admitted. An endpoint that
 * `countsItself` counts the request in the same Redis step as its spend reservation (one round
 * trip on the hot path) and sets `rateCounted`; if it is refused before counting (validation,
 * planning), the request is counted here, and past the tier the 429 is the answer.
 */
export function keyRateLimit(redis: RedisHandle, options: { countsItself?: (ctx: GatewayContext) => boolean } = {}): Middleware<GatewayState> {
  return async (ctx, next) => {
    const key = ctx.state.key!;
    if (!options.countsItself?.(ctx)) {
      ctx.state.rateCounted = true;
      refuseOverRate(key, await meterKey(ctx, redis, key));
      return next();
    }
    const countHere = async () => {
      ctx.state.rateCounted = true;
      refuseOverRate(key, await meterKey(ctx, redis, key));
    };
    try {
      await next();
    } catch (err) {
      // Redis itself failing is the answer (503) already: asking it again would only double the wait.
      if (!ctx.state.rateCounted && !isTransientDependencyError(err)) await countHere();
      throw err;
    }
    if (!ctx.state.rateCounted) await countHere();
  };
}

export type KeyMeterDeps = { keys: KeyResolver; clock: Clock; redis: RedisHandle };

/**
 * For answers decided before authentication (413 from Content-Length, 404 for an unknown
 * `/v1` path): when the Authorization header carries a usable gateway key, count the request
 * and set `X-RateLimit-*`. It reads only the header and the in-process key cache (Postgres on a
 * miss, as any request would), never the body. It never changes the answer: a missing, unknown
 * or dead key, or Redis failing, just leaves the headers off.
 */
export async function meterKnownKey(ctx: GatewayContext, deps: KeyMeterDeps): Promise<void> {
  try {
    const bearer = parseBearer(ctx.get('authorization') || undefined);
    if (bearer.kind !== 'present' || !bearer.secret.startsWith(GATEWAY_KEY_PREFIX)) return;
    const key = await deps.keys.resolve(sha256Hex(bearer.secret));
    if (!key || refuseKey(key, deps.clock.now(), ctx.ip)?.status === 401) return;
    await meterKey(ctx, deps.redis, key);
  } catch {
    // Best effort: the refusal being answered is the answer.
  }
}
