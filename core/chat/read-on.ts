/**
 * Streams read on after their client left (core/chat/execute.ts CLIENT_GONE_READ_MS), counted
 * per organization in this process. Each holds a pooled upstream socket, and the pool is shared
 * by every tenant: one organization's abandoned streams must not queue another's calls. Past the
 * cap a newly abandoned stream is cut at once, and charged its worst case (issue 54).
 */
export const READ_ON_PER_ORG = 32;

const reading = new Map<string, number>();

/** A slot for one more stream read on for `orgId`: its release (call once the stream ends), or null past the cap. */
export function readOnSlot(orgId: string): (() => void) | null {
  const held = reading.get(orgId) ?? 0;
  if (held >= READ_ON_PER_ORG) return null;
  reading.set(orgId, held + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (reading.get(orgId) ?? 1) - 1;
    if (left > 0) reading.set(orgId, left);
    else reading.delete(orgId);
  };
}

/** How many streams `orgId` has read on now (for tests and metrics). */
export function readingOn(orgId: string): number {
  return reading.get(orgId) ?? 0;
}
