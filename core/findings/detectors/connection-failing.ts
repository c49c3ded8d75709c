import type { Detection } from '../detection';
import { formatCount, formatPercent, formatRange } from './robust';

export const FAILURE_REASONS = ['credential', 'rate_limit', 'server_error', 'timeout', 'connection'] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** One connection's attempts upstream in a window, and its failures by reason class. */
export type ConnectionWindow = {
  orgId: string;
  connectionId: string;
  from: Date;
  to: Date;
  attempts: number;
  failures: Record<FailureReason, number>;
};

/** Refused credentials do not heal by retrying: a few are enough to call it. */
export const CREDENTIAL_FAILURES_CRITICAL = 3;
export const FAILURE_RATE_WARNING = 0.5;
/** Under this many attempts a failure rate is a handful of requests, not a connection failing. */
export const FAILURE_MIN_ATTEMPTS = 10;

const REASON_TEXT: Record<FailureReason, string> = {
  credential: 'refused credentials',
  rate_limit: 'rate limits',
  server_error: 'server errors',
  timeout: 'timeouts',
  connection: 'connection errors',
};

/** The reason with the most failures; a tie goes to the earlier in FAILURE_REASONS. */
function mainReason(failures: Record<FailureReason, number>): FailureReason {
  let main: FailureReason = FAILURE_REASONS[0];
  for (const reason of FAILURE_REASONS) if (failures[reason] > failures[main]) main = reason;
  return main;
}

/**
 * Critical on repeated refused credentials (a revoked or expired key fails every request until
 * someone fixes it); otherwise a warning when at least half of a real number of attempts failed.
 */
export function detectConnectionFailing(w: ConnectionWindow): Detection | null {
  const failed = FAILURE_REASONS.reduce((sum, reason) => sum + w.failures[reason], 0);
  const failureRate = w.attempts > 0 ? failed / w.attempts : 0;
  const credentialRefused = w.failures.credential >= CREDENTIAL_FAILURES_CRITICAL;
  if (!credentialRefused && !(w.attempts >= FAILURE_MIN_ATTEMPTS && failureRate >= FAILURE_RATE_WARNING)) return null;
  const main = mainReason(w.failures);
  const range = formatRange(w.from, w.to);
  return {
    orgId: w.orgId,
    type: 'connection.failing',
    severity: credentialRefused ? 'critical' : 'warning',
    title: credentialRefused ? `Connection ${w.connectionId} credentials refused` : `Connection ${w.connectionId} failing`,
    summary: credentialRefused
      ? `The provider refused connection ${w.connectionId}'s credentials ${formatCount(w.failures.credential)} times in `
        + `${formatCount(w.attempts)} attempts ${range}.`
      : `Connection ${w.connectionId} failed ${formatCount(failed)} of ${formatCount(w.attempts)} attempts (${formatPercent(failureRate)}) ${range}, `
        + `mostly ${REASON_TEXT[main]}.`,
    scope: { kind: 'connection', id: w.connectionId },
    subject: {},
    window: { from: w.from, to: w.to },
    observed: failureRate,
    expected: null,
    threshold: FAILURE_RATE_WARNING,
    evidence: { attempts: w.attempts, failures: { ...w.failures }, failure_rate: failureRate, main_reason: main },
  };
}
