import { useState } from 'react';

/** A write from a page: its error shown in one place, and the page's reads refreshed after it. */
export function useAction(after: () => void): { error: string | null; run: (work: () => Promise<unknown>) => Promise<void> } {
  const [error, setError] = useState<string | null>(null);
  return {
    error,
    async run(work) {
      setError(null);
      try {
        await work();
        after();
      } catch (err) {
        setError((err as Error).message);
      }
    },
  };
}
