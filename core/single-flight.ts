/**
 * Work shared by every caller that asks for the same key while it runs: the first starts it,
 * the others wait for the same promise, and once it ends the next ask starts afresh.
 */
export type SingleFlight<V> = {
  run(key: string, work: () => Promise<V>): Promise<V>;
  /** Forgets what is under way: the next ask starts its own (what was under way still ends). */
  clear(): void;
};

export function createSingleFlight<V>(): SingleFlight<V> {
  const running = new Map<string, Promise<V>>();
  return {
    run(key, work) {
      let pending = running.get(key);
      if (!pending) {
        const started: Promise<V> = work().finally(() => {
          // A clear() and a new run may have taken the key since: only this run's own entry goes.
          if (running.get(key) === started) running.delete(key);
        });
        running.set(key, (pending = started));
      }
      return pending;
    },
    clear: () => running.clear(),
  };
}
