import type { RequestAttempt } from '../db/schema';
import { GatewayError } from '../errors';
import { providerRejectedMessage } from '../providers/errors';
import type { ProviderFailure } from '../providers/types';
import type { Candidate } from '../routing/candidates';

export type FailedAttempt = { candidate: Candidate; failure: ProviderFailure };

/** Spec 7: a provider's Retry-After is passed on, capped at five minutes. */
export const MAX_PROVIDER_RETRY_AFTER_SECONDS = 300;

function describe(f: FailedAttempt): string {
  const reason = f.failure.status ? `${f.failure.kind} (HTTP ${f.failure.status})` : f.failure.kind;
  return `${f.candidate.connection.id} (${f.candidate.connection.kind}, ${f.candidate.upstreamModel}): ${reason}`;
}

/**
 * The one error a request gets after every candidate it tried failed (spec 7): the provider's
 * own 400 when each refused the request as invalid; 408 when all timed out; 429
 * provider_rate_limited when one was rate-limited; 403 when moderation refused it everywhere;
 * 503 model_not_served when no key could serve the model; else 502 naming each one tried.
 */
export function finalError(failures: FailedAttempt[]): GatewayError {
  if (failures.length === 0) return new GatewayError('no_available_provider', 'No connection could take the request right now.');
  const kinds = new Set(failures.map((f) => f.failure.kind));
  const every = (...k: string[]) => [...kinds].every((x) => k.includes(x));
  if (every('invalid_request', 'unsupported_parameter')) return new GatewayError('invalid_request', providerRejectedMessage(failures[0]!.failure.message));
  if (every('timeout')) return new GatewayError('request_timeout', `Every connection tried timed out: ${failures.map(describe).join('; ')}.`);
  if (every('moderation')) return new GatewayError('permission_denied', 'The provider refused the content (moderation).');
  if (every('model_not_served')) return new GatewayError('model_not_served', `Every connection answered that its key cannot serve this model: ${failures.map(describe).join('; ')}.`);
  if (kinds.has('rate_limit')) {
    const waits = failures.map((f) => ('retryAfterSeconds' in f.failure ? f.failure.retryAfterSeconds : undefined)).filter((s): s is number => s !== undefined);
    const headers: Record<string, string> = waits.length > 0 ? { 'Retry-After': String(Math.min(MAX_PROVIDER_RETRY_AFTER_SECONDS, Math.max(...waits))) } : {};
    return new GatewayError('provider_rate_limited', `Every connection failed and the provider account rate-limited the request: ${failures.map(describe).join('; ')}.`, { headers });
  }
  return new GatewayError('upstream_error', `Every connection failed: ${failures.map(describe).join('; ')}.`);
}

export function attemptRecord(candidate: Candidate, position: string, outcome: string, status: number | null, startedAt: number): RequestAttempt {
  return {
    connection_id: candidate.connection.id,
    provider: candidate.connection.kind,
    model: candidate.upstreamModel,
    position,
    outcome,
    status,
    latency_ms: Math.round(performance.now() - startedAt),
  };
}
