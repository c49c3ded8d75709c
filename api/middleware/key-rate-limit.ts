import type { Middleware } from 'koa';
import { countInWindow, retryAfterSeconds } from '../../core/ratelimit/fixed-window';
import type { RedisHandle } from '../../core/redis';
import { GatewayError } from '../../core/errors';
import type { GatewayState } from '../context';

const WINDOW_MS = 60_000;

/**
 * The key's per-minute request tier (spec 8), counted in Redis so every instance shares it.
 * `X-RateLimit-*` go on every response, refusals included.
 */
export function keyRateLimit(redis: RedisHandle): Middleware<GatewayState> {
  return async (ctx, next) => {
    const key = ctx.state.key!;
    const window = await countInWindow(redis.redis, `key-rpm:${key.keyId}`, WINDOW_MS);
    ctx.set('X-RateLimit-Limit', String(key.rateLimitRpm));
    ctx.set('X-RateLimit-Remaining', String(Math.max(0, key.rateLimitRpm - window.count)));
    ctx.set('X-RateLimit-Reset', String(Math.ceil((Date.now() + window.resetInMs) / 1000)));
    if (window.count > key.rateLimitRpm) {
      throw new GatewayError('rate_limit_exceeded', `This key may make ${key.rateLimitRpm} requests a minute.`, {
        headers: { 'Retry-After': String(retryAfterSeconds(window)) },
      });
    }
    await next();
  };
}
