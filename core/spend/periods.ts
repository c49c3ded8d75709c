/** Spec 8, spend limits rule 2: when each period began, in UTC. */
export function periodStart(period: 'daily' | 'weekly' | 'monthly' | 'never', now: Date, billingDay: number): Date {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  switch (period) {
    case 'daily':
      return new Date(Date.UTC(y, m, d));
    case 'weekly': {
      // Midnight UTC on Monday.
      const sinceMonday = (now.getUTCDay() + 6) % 7;
      return new Date(Date.UTC(y, m, d - sinceMonday));
    }
    case 'monthly':
      // Midnight UTC on the organization's budget cycle day (1 to 28).
      return d >= billingDay ? new Date(Date.UTC(y, m, billingDay)) : new Date(Date.UTC(y, m - 1, billingDay));
    case 'never':
      return new Date(0);
  }
}

const DAY_MS = 86_400_000;

/** When the window that began at `start` ends (spec 8 rule 2). */
export function nextReset(period: 'daily' | 'weekly' | 'monthly', start: Date, billingDay: number): Date {
  if (period === 'daily') return new Date(start.getTime() + DAY_MS);
  if (period === 'weekly') return new Date(start.getTime() + 7 * DAY_MS);
  return new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, billingDay));
}
