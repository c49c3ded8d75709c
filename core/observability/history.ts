import type { Plan } from '../db/schema';

/**
 * How far back observability reads reach, by plan (issue 13; docs/decisions.md): older rows are
 * neither listed nor counted, whatever `from` a request names.
 */
export const HISTORY_WINDOW_DAYS: Record<Plan, number> = { trial: 7, team: 30, business: 90 };

/** The earliest instant a read for this plan may see. */
export function historyStart(plan: Plan, now: Date): Date {
  return new Date(now.getTime() - HISTORY_WINDOW_DAYS[plan] * 86_400_000);
}

/** The longest window any plan has: raw rows and partitions older than this can go. */
export const LONGEST_HISTORY_DAYS = Math.max(...Object.values(HISTORY_WINDOW_DAYS));
