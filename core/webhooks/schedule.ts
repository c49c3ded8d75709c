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
 * A pending delivery whose next step is this overdue is started by the sweep (issues 20, 34). Well
 * past the normal start right after the commit, a retried job step's own restart and a worker's
 * restart, so the sweep does not race them; not scaled, since it waits for those real-time paths.
 */
export const WEBHOOK_SWEEP_GRACE_MS = 10 * 60_000;

/**
 * Settled deliveries outside their organization's delivery log (its latest 100) are pruned by
 * the sweep once settled this long: a job's timeline still shows its recent deliveries.
 */
export const DELIVERY_PRUNE_AFTER_MS = 7 * 86_400_000;

/** At most this many deliveries pruned per sweep run, so one run's delete stays short. */
export const DELIVERY_PRUNE_BATCH = 5_000;
