import { z } from 'zod';
import { toInstant } from '../../../core/observability/instant';

/**
 * Query parameters the management data operations share: an instant as ISO 8601 or Unix
 * seconds (issue 13 `from`, `to`), answered as a Date.
 */
export const instantParam = z.string().min(1).max(64).transform((text, ctx) => {
  const at = toInstant(text);
  if (!at) {
    ctx.addIssue({ code: 'custom', message: 'expected an ISO 8601 time or Unix seconds' });
    return z.NEVER;
  }
  return at;
}).meta({ description: 'ISO 8601 (`2025-01-31T12:00:00Z`) or Unix seconds.' });

/** Unix seconds on the wire, like every management answer. */
export { unixSeconds } from '../../../core/clock';
