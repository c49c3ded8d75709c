import type { Middleware, Next } from 'koa';
import { batchItemAuthOf, type BatchItemAuth } from '../batch-item-auth';
import type { AuthFailureLimiter } from '../../core/auth/auth-failure-limiter';
import { GATEWAY_KEY_PREFIX, MANAGEMENT_TOKEN_PREFIX, parseBearer } from '../../core/auth/credentials';
import { refuseKey, type KeyResolver } from '../../core/auth/gateway-key-auth';
import type { Clock } from '../../core/clock';
import { sha256Hex } from '../../core/crypto/secrets';
import { GatewayError } from '../../core/errors';
import type { RedisHandle } from '../../core/redis';
import type { GatewayContext, GatewayState } from '../context';
import { authFailure } from './auth-failures';
import { meterKey } from './key-rate-limit';

/** `/v1` authentication: a gateway key as a Bearer token (or `x-api-key`), resolved from the in-process cache. */
export function gatewayAuth(deps: { keys: KeyResolver; authFailures: AuthFailureLimiter; clock: Clock; redis: RedisHandle }): Middleware<GatewayState> {
  return async (ctx, next) => {
    const item = batchItemAuthOf(ctx.req);
    if (item) return batchItemKey(ctx, item, next);
    // Anthropic's clients send the key as `x-api-key`; a Bearer header wins when both come.
    const apiKey = ctx.get('x-api-key');
    const bearer = parseBearer(ctx.get('authorization') || (apiKey ? `Bearer ${apiKey}` : undefined));
    if (bearer.kind === 'missing') {
      throw new GatewayError('authentication', 'Missing API key. Send it as `Authorization: Bearer <key>` (or `x-api-key: <key>`).');
    }
    if (bearer.kind === 'malformed') {
      throw await authFailure(ctx, deps.authFailures, 'gateway', 'Malformed Authorization header. Expected `Bearer <key>`.');
    }
    if (bearer.secret.startsWith(MANAGEMENT_TOKEN_PREFIX)) {
      throw new GatewayError('authentication', 'A management token cannot call the gateway; use a gateway key.');
    }
    const key = bearer.secret.startsWith(GATEWAY_KEY_PREFIX) ? await deps.keys.resolve(sha256Hex(bearer.secret)) : null;
    if (!key) throw await authFailure(ctx, deps.authFailures, 'gateway', 'Invalid API key.');
    const refusal = refuseKey(key, deps.clock.now(), ctx.ip);
    if (refusal?.status === 401) throw await authFailure(ctx, deps.authFailures, 'gateway', refusal.message);
    if (refusal) {
      // The key is known, so its refusal (402, 403) is counted and carries X-RateLimit-* too (spec 8).
      Object.assign(ctx.state.logFields, { key_id: key.keyId, org_id: key.orgId });
      await meterKey(ctx, deps.redis, key).catch(() => undefined);
      throw refusal;
    }
    ctx.state.key = key;
    Object.assign(ctx.state.logFields, { key_id: key.keyId, org_id: key.orgId });
    await next();
  };

  /**
   * A batch item (issue 56) runs as its batch's key, resolved as a request's key is and refused
   * for the same reasons (revoked, expired, disabled, the organization suspended), except the
   * address allowlist: the item comes from a worker, and the request that created the batch
   * passed it.
   */
  async function batchItemKey(ctx: GatewayContext, item: BatchItemAuth, next: Next): Promise<void> {
    const key = await deps.keys.resolve(item.secretHash);
    if (!key) throw new GatewayError('authentication', 'The key that created this batch no longer exists.');
    const refusal = refuseKey(key, deps.clock.now(), null);
    if (refusal) throw refusal;
    ctx.state.key = key;
    ctx.state.batchId = item.batchId;
    Object.assign(ctx.state.logFields, { key_id: key.keyId, org_id: key.orgId, batch_id: item.batchId });
    await next();
  }
}
