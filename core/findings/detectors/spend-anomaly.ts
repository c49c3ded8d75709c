import type { Detection } from '../detection';
import { capitalize, describeScope, floorToHour, formatCount, formatDollars, formatUtc, HOUR_MS, mad, median, WEEK_MS } from './robust';

/** What a spend detector watches: the organization as a whole, one project, or one key. */
export type SpendScope = { kind: 'organization' | 'project' | 'member' | 'key' | 'commitment' | 'end_user'; id: string };

/** One hour's spend; `hour` is the start of the UTC hour. */
export type HourlySpend = { hour: Date; cost: number; requests: number };

/**
 * A scope's hourly spend. Sparse: an hour missing between the first hour present and the hour
 * judged was an hour with no traffic, $0 and 0 requests.
 */
export type SpendSeries = { orgId: string; scope: SpendScope; hours: HourlySpend[] };

export type SpendAnomalySettings = {
  /** The least excess over the usual spend worth telling anyone about, in dollars. */
  dollarFloor: number;
};

export type SpendBaseline = 'same_hour_of_week' | 'trailing_7_days';

export const SPEND_ANOMALY_Z_WARNING = 6;
export const SPEND_ANOMALY_Z_CRITICAL = 10;
/** An hour with fewer requests is too thin to call: a couple of long prompts are not an anomaly. */
export const SPEND_ANOMALY_MIN_REQUESTS = 20;

const SEASONAL_WEEKS = 4;
const TRAILING_HOURS = 168;
/** Under a day of history the trailing baseline has not seen a whole daily cycle. */
const MIN_TRAILING_HOURS = 24;
/** MAD times this estimates a normal distribution's standard deviation. */
const MAD_TO_SIGMA = 1.4826;
/**
 * Floors on the scale: a flat history has a MAD of 0, which would make any cent above it an
 * anomaly. The scale is at least a tenth of the usual spend, and at least a cent.
 */
const SCALE_MEDIAN_FRACTION = 0.1;
const SCALE_MIN_DOLLARS = 0.01;

const BASELINE_TEXT: Record<SpendBaseline, string> = {
  same_hour_of_week: 'the same hour of the previous four weeks',
  trailing_7_days: 'the previous seven days',
};

/**
 * Judges the last complete hour's spend against the scope's own history. With four full weeks
 * of history the baseline is the same hour of the week one to four weeks back, so a busy Monday
 * morning is compared with Monday mornings; with less it is every hour of the trailing seven
 * days. The spend fires at a robust z of 6 (warning) or 10 (critical), and only when the excess
 * is at least the dollar floor and the hour had enough requests to mean something.
 */
export function detectSpendAnomaly(series: SpendSeries, now: Date, settings: SpendAnomalySettings): Detection | null {
  const target = floorToHour(now).getTime() - HOUR_MS;
  const byHour = new Map<number, { cost: number; requests: number }>();
  let first = Number.POSITIVE_INFINITY;
  for (const entry of series.hours) {
    const at = floorToHour(entry.hour).getTime();
    // The hour in progress is incomplete, and later hours are not history.
    if (at > target) continue;
    const seen = byHour.get(at);
    if (seen) {
      seen.cost += entry.cost;
      seen.requests += entry.requests;
    } else {
      byHour.set(at, { cost: entry.cost, requests: entry.requests });
    }
    first = Math.min(first, at);
  }
  const hour = byHour.get(target);
  if (!hour || hour.requests < SPEND_ANOMALY_MIN_REQUESTS) return null;
  const costAt = (at: number) => byHour.get(at)?.cost ?? 0;

  let baseline: SpendBaseline;
  const points: number[] = [];
  if (first <= target - SEASONAL_WEEKS * WEEK_MS) {
    baseline = 'same_hour_of_week';
    for (let week = 1; week <= SEASONAL_WEEKS; week++) points.push(costAt(target - week * WEEK_MS));
  } else {
    baseline = 'trailing_7_days';
    for (let at = Math.max(first, target - TRAILING_HOURS * HOUR_MS); at < target; at += HOUR_MS) points.push(costAt(at));
    if (points.length < MIN_TRAILING_HOURS) return null;
  }

  const x = hour.cost;
  const center = median(points);
  const deviation = mad(points, center);
  const scale = Math.max(MAD_TO_SIGMA * deviation, SCALE_MEDIAN_FRACTION * center, SCALE_MIN_DOLLARS);
  const z = (x - center) / scale;
  const excess = x - center;
  if (z < SPEND_ANOMALY_Z_WARNING || excess < settings.dollarFloor) return null;

  const scope = describeScope(series.scope);
  return {
    orgId: series.orgId,
    type: 'spend.anomaly',
    severity: z >= SPEND_ANOMALY_Z_CRITICAL ? 'critical' : 'warning',
    title: `Spend anomaly on ${scope}`,
    summary: `${capitalize(scope)} spent ${formatDollars(x)} over ${formatCount(hour.requests)} requests in the hour from ${formatUtc(new Date(target))}, `
      + `${formatDollars(excess)} above the usual ${formatDollars(center)} for ${BASELINE_TEXT[baseline]} (robust z ${z.toFixed(1)}).`,
    scope: { kind: series.scope.kind, id: series.scope.id },
    subject: {},
    window: { from: new Date(target), to: new Date(target + HOUR_MS) },
    observed: x,
    expected: center,
    // The line is drawn in robust z, not dollars: evidence.scale turns one into the other.
    threshold: SPEND_ANOMALY_Z_WARNING,
    evidence: {
      z,
      median: center,
      mad: deviation,
      scale,
      baseline,
      baseline_points: points.length,
      requests: hour.requests,
      excess,
    },
  };
}
