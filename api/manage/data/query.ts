import { z } from 'zod';

/**
 * Query parameters the management data operations share: an instant as ISO 8601 or Unix
 * seconds (issue 13 `from`, `to`), answered as a Date.
 */
export const instantParam = z.string().min(1).max(64).transform((text, ctx) => {
  const at = /^\d{1,12}(\.\d+)?$/.test(text) ? new Date(Number(text) * 1000) : /^\d{4}-\d{2}-\d{2}/.test(text) ? new Date(text) : new Date(NaN);
  if (Number.isNaN(at.getTime())) {
    ctx.addIssue({ code: 'custom', message: 'expected an ISO 8601 time or Unix seconds' });
    return z.NEVER;
  }
  return at;
}).meta({ description: 'ISO 8601 (`2025-01-31T12:00:00Z`) or Unix seconds.' });

/** Unix seconds on the wire, like every management answer. */
export function unixSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}
