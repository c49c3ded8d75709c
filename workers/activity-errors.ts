import { ApplicationFailure, TemporalFailure } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';

/** The failure type of a database error an activity met, with its SQLSTATE and nothing else. */
const DATABASE_ERROR = 'DatabaseError';

/**
 * SQLSTATE classes of a statement that cannot succeed however often it is sent again: a data
 * exception (22), an integrity violation (23), an error a trigger or function raised (P0). An
 * activity meeting one fails for good instead of retrying without end; every other database
 * error (a lost connection, a serialization failure, a column a migration has not yet added
 * during a deploy) is retried on the run's own backoff.
 */
const PERMANENT_SQLSTATE_CLASSES = new Set(['22', '23', 'P0']);

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** A query error as drizzle wraps it (`Failed query: <sql> params: <values>`) or as pg throws it. */
function databaseError(err: unknown): { code: string | null } | null {
  if (!(err instanceof Error)) return null;
  const wrapped = 'query' in err && 'params' in err;
  const pg = (wrapped ? err.cause : err) as { code?: unknown; severity?: unknown } | undefined;
  const code = typeof pg?.code === 'string' ? pg.code : null;
  if (wrapped) return { code };
  return code !== null && SQLSTATE.test(code) && pg?.severity !== undefined ? { code } : null;
}

/**
 * An activity's database error without its text (issue 55, item 4): drizzle's message carries
 * the statement and every bound value (a job's prompt among them), and Postgres's own messages
 * can quote values. What reaches Temporal (and from there a job's error or a delivery's log)
 * is the SQLSTATE only; Temporal failures, which our code words itself, pass as they are.
 */
export function scrubbedActivityError(err: unknown): unknown {
  if (err instanceof TemporalFailure) return err;
  const db = databaseError(err);
  if (!db) return err;
  const permanent = db.code !== null && PERMANENT_SQLSTATE_CLASSES.has(db.code.slice(0, 2));
  return ApplicationFailure.create({
    type: DATABASE_ERROR,
    message: `a database statement failed (${db.code === null ? 'connection lost' : `SQLSTATE ${db.code}`})`,
    nonRetryable: permanent,
  });
}

/** The interceptor every worker runs innermost, so tracing and the SDK's log see the scrubbed error too. */
export class ScrubActivityErrors implements ActivityInboundCallsInterceptor {
  async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    try {
      return await next(input);
    } catch (err) {
      throw scrubbedActivityError(err);
    }
  }
}
