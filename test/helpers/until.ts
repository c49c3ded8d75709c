const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it answers something truthy, which it returns; fails naming `what` after `timeoutMs`. */
export async function until<T>(probe: () => Promise<T | null | undefined | false>, what: string, timeoutMs = 40_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
