import { Context } from '@temporalio/activity';

/** How often an activity heartbeats while its work runs (the workflows' heartbeat timeouts are 10 s and more). */
const HEARTBEAT_EVERY_MS = 1_000;

/**
 * Heartbeats every second while `work` runs, from its start: the heartbeat timeout runs from the
 * attempt's start, and the reads and writes around a provider call (a slow Postgres, a row lock)
 * must not look like a lost worker (issue 55), nor a batch's wave of model calls (issue 56).
 * Work shorter than a second sends none: no beat at the start, since the first goes to the
 * server at once (a write per status check).
 */
export async function beatingThroughout<T>(work: () => Promise<T>, details: () => unknown = () => undefined): Promise<T> {
  const context = Context.current();
  // Each beat carries the attempt's details so far: a later beat must not wipe what an earlier
  // one told the next attempt (a submit's accepted render).
  const beat = setInterval(() => context.heartbeat(details()), HEARTBEAT_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(beat);
  }
}
