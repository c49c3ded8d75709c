import type { Detection } from '../detection';
import { formatCount, formatPercent, formatRange, reaches } from './robust';

export type TrafficStats = { requests: number; p95Ms: number; errorRate: number };

/** One model on one connection: a recent window against the trailing one before it. */
export type LatencyWindow = {
  orgId: string;
  model: string;
  connectionId: string;
  from: Date;
  to: Date;
  current: TrafficStats;
  trailing: TrafficStats;
};

/** Fewer requests make a p95 and an error rate too noisy to compare. */
export const REGRESSION_MIN_REQUESTS = 50;
export const LATENCY_REGRESSION_FACTOR = 2;
/** Doubling from 80 ms to 160 ms is no one's problem: the rise must also be this large. */
export const LATENCY_REGRESSION_MIN_RISE_MS = 500;
export const ERROR_RATE_REGRESSION_RISE = 0.1;

function formatMs(ms: number): string {
  return `${formatCount(Math.round(ms))} ms`;
}

/**
 * A model on a connection getting slower (p95 at least doubled and at least 500 ms up) or
 * failing more (error rate up ten points or more) than in its trailing window. Observed and
 * expected are the p95 when latency regressed, otherwise the error rate.
 */
export function detectRegression(w: LatencyWindow): Detection | null {
  const { current, trailing } = w;
  if (current.requests < REGRESSION_MIN_REQUESTS || trailing.requests < REGRESSION_MIN_REQUESTS) return null;
  const latencyLine = Math.max(LATENCY_REGRESSION_FACTOR * trailing.p95Ms, trailing.p95Ms + LATENCY_REGRESSION_MIN_RISE_MS);
  const latencyRegressed = current.p95Ms >= latencyLine;
  const errorLine = trailing.errorRate + ERROR_RATE_REGRESSION_RISE;
  const errorsRegressed = reaches(current.errorRate - trailing.errorRate, ERROR_RATE_REGRESSION_RISE);
  if (!latencyRegressed && !errorsRegressed) return null;

  const parts: string[] = [];
  if (latencyRegressed) parts.push(`p95 latency ${formatMs(current.p95Ms)} against ${formatMs(trailing.p95Ms)}`);
  if (errorsRegressed) parts.push(`error rate ${formatPercent(current.errorRate)} against ${formatPercent(trailing.errorRate)}`);
  const what = latencyRegressed && errorsRegressed ? 'Latency and error' : latencyRegressed ? 'Latency' : 'Error rate';
  return {
    orgId: w.orgId,
    type: 'traffic.regression',
    severity: 'warning',
    title: `${what} regression on ${w.model} via ${w.connectionId}`,
    summary: `${w.model} on connection ${w.connectionId} ${formatRange(w.from, w.to)} (${formatCount(current.requests)} requests): `
      + `${parts.join(', and ')} in the trailing window.`,
    scope: { kind: 'connection', id: w.connectionId },
    subject: { model: w.model },
    window: { from: w.from, to: w.to },
    observed: latencyRegressed ? current.p95Ms : current.errorRate,
    expected: latencyRegressed ? trailing.p95Ms : trailing.errorRate,
    threshold: latencyRegressed ? latencyLine : errorLine,
    evidence: {
      current: { requests: current.requests, p95_ms: current.p95Ms, error_rate: current.errorRate },
      trailing: { requests: trailing.requests, p95_ms: trailing.p95Ms, error_rate: trailing.errorRate },
      latency_regressed: latencyRegressed,
      errors_regressed: errorsRegressed,
    },
  };
}
