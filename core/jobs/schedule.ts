/** Spec 3.1 / 8: a running job is checked at most 60 times before it times out. */
export const MAX_STATUS_CHECKS = 60;
/** Spec 8: the output link works for 24 hours after completion. */
export const OUTPUT_RETENTION_MS = 24 * 60 * 60 * 1000;

const FIRST_CHECK_MS = 60_000;
const LONGEST_GAP_MS = 5 * 60_000;

/**
 * The waits before each status check: one minute, growing by half each time, at most five
 * (spec 2.1: checked every one to five minutes). Scaled by GW_SCHEDULE_SCALE and passed to
 * the workflow as input, so tests run the whole schedule in seconds.
 */
export function statusCheckSchedule(scale: number): number[] {
  const gaps: number[] = [];
  let gap = FIRST_CHECK_MS;
  for (let i = 0; i < MAX_STATUS_CHECKS; i++) {
    gaps.push(Math.max(10, Math.round(gap * scale)));
    gap = Math.min(LONGEST_GAP_MS, gap * 1.5);
  }
  return gaps;
}
