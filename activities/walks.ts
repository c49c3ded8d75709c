import type { Database } from '../core/db/client';
import { endWalk } from '../core/walk-cursors';

/** The end of a scheduled walk, shared by the detectors and the MCP sync (core/walk-cursors.ts). */
export function createWalkActivities(deps: { db: Database }) {
  return {
    /** The walk reached its last page: its cursor goes, and the next run starts from the beginning. */
    async endWalk(input: { walk: string }): Promise<void> {
      await endWalk(deps.db, input.walk);
    },
  };
}

export type WalkActivities = ReturnType<typeof createWalkActivities>;
