/**
 * Every durable wait the product has goes through here, so GW_SCHEDULE_SCALE can run a day of
 * schedules in seconds in development and black-box tests. Never below one millisecond.
 */
export function scaleDuration(ms: number, scale: number): number {
  return Math.max(1, Math.round(ms * scale));
}
