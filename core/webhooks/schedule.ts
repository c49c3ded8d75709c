/**
 * When each of a delivery's twelve attempts is made (spec 6.3): the wait before it, counted
 * from the previous attempt. Twelve attempts over about 16 hours, then the delivery is failed.
 */
export const WEBHOOK_ATTEMPT_DELAYS_MS: readonly number[] = [
  0,
  10_000,
  30_000,
  60_000,
  2 * 60_000,
  5 * 60_000,
  10 * 60_000,
  30 * 60_000,
  60 * 60_000,
  2 * 60 * 60_000,
  4 * 60 * 60_000,
  8 * 60 * 60_000,
];

/**
 * Alert notifications' own schedule (issue 22): five attempts, at once, then 1 min, 5 min, 30 min
 * and 2 h after the previous one. Shorter than a job event's: an alert hours late is news no more.
 */
export const ALERT_ATTEMPT_DELAYS_MS: readonly number[] = [0, 60_000, 5 * 60_000, 30 * 60_000, 2 * 60 * 60_000];

/** A receiver must answer within this long (spec 8); never scaled, whatever the schedule. */
export const WEBHOOK_ANSWER_TIMEOUT_MS = 10_000;

/** The schedule a delivery runs on: `GW_SCHEDULE_SCALE` compresses it for development and tests. */
export function webhookAttemptDelays(scale: number): number[] {
  return WEBHOOK_ATTEMPT_DELAYS_MS.map((ms) => Math.round(ms * scale));
}

/** The alert schedule, scaled the same way. */
export function alertAttemptDelays(scale: number): number[] {
  return ALERT_ATTEMPT_DELAYS_MS.map((ms) => Math.round(ms * scale));
}

/**
 * A delivery queued this long ago and never attempted is started by the sweep (issue 20). Well
 * past the normal start right after the commit and a retried job step's own restart, so the
 * sweep does not race them; not scaled, since it waits for those real-time paths.
 */
export const WEBHOOK_SWEEP_GRACE_MS = 10 * 60_000;

/**
 * The sweep looks no further back than this: a delivery left pending and unattempted for longer
 * (one whose workflow an operator terminated, say) is left as it is, so such rows cannot pile
 * up at the front of every run and crowd out new ones. Three days is far past the 16 hours of a
 * delivery's own schedule and any outage the sweep should bridge.
 */
export const WEBHOOK_SWEEP_MAX_AGE_MS = 3 * 86_400_000;
