/**
 * Work a graceful stop waits for: each model call from the moment its spend is held until its
 * spend has ended (settled or released) and its rows are queued. A stop waits for these (at
 * most a grace period) before the request-log and ledger writers flush and Postgres closes,
 * so no call that ran is lost with the process.
 */
export type InFlight = {
  /** Counts one piece of work; the function ends it (once, however often it is called). */
  begin(): () => void;
  readonly count: number;
  /** Resolves true once nothing is in flight, or false when `timeoutMs` passed first. */
  drained(timeoutMs: number): Promise<boolean>;
};

export function createInFlight(): InFlight {
  let count = 0;
  let waiters: Array<() => void> = [];
  const settle = () => {
    if (count > 0) return;
    const ready = waiters;
    waiters = [];
    for (const w of ready) w();
  };
  return {
    begin() {
      count++;
      let ended = false;
      return () => {
        if (ended) return;
        ended = true;
        count--;
        settle();
      };
    },
    get count() {
      return count;
    },
    drained(timeoutMs) {
      if (count === 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiters = waiters.filter((w) => w !== done);
          resolve(false);
        }, timeoutMs);
        timer.unref();
        const done = () => {
          clearTimeout(timer);
          resolve(true);
        };
        waiters.push(done);
      });
    },
  };
}
