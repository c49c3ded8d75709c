import type { AuthFailureLimiter } from '../../core/auth/auth-failure-limiter';
import { GatewayError } from '../../core/errors';
import type { GatewayContext } from '../context';

/**
 * Turns a credential failure into the error to answer: 401 as a rule, 429 once the client's
 * address has failed too often this minute (counted in Redis, so every instance agrees).
 */
export async function authFailure(
  ctx: GatewayContext,
  limiter: AuthFailureLimiter,
  scope: 'gateway' | 'manage',
  message: string,
): Promise<GatewayError> {
  const verdict = await limiter.recordFailure(scope, ctx.ip);
  if (!verdict.limited) return new GatewayError('authentication', message);
  const headers = { 'Retry-After': String(verdict.retryAfterSeconds) };
  return scope === 'gateway'
    ? new GatewayError('invalid_api_key_rate_limited', 'Too many invalid API keys from this address.', { headers })
    : new GatewayError('rate_limit_exceeded', 'Too many failed authentications from this address.', { headers });
}
