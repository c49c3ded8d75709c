import type { Dispatcher } from 'undici';
import type { Clock } from '../core/clock';
import type { Sealer } from '../core/crypto/sealing';
import type { Database } from '../core/db/client';
import { activeServerPage, syncRegisteredServer } from '../core/mcp/sync';
import { walkPage, type WalkStep } from '../core/walk-cursors';
import type { StartDeliveries } from './webhook-dispatch';

export type McpToolSyncDeps = { db: Database; clock: Clock; sealer: Sealer; dispatcher: Dispatcher; startDeliveries: StartDeliveries; publicUrl: string };

/** What one server's sync reports to the workflow (no deliveries: they are started here). */
export type McpServerSyncSummary = { serverId: string; outcome: 'synced' | 'failed' | 'skipped'; toolsChanged: number; alertsQueued: number };

/**
 * The tool-gateway sync (issue 15): re-lists every active server's tools with its credential
 * through the guarded dispatcher (core/mcp/sync.ts), marks approved tools whose definition
 * changed `changed`, records health, and raises `mcp.tool_changed` and `mcp.server_failing` as
 * findings (core/findings/store.ts, which queues their notifications), starting
 * the queued deliveries once the transaction that queued them has committed. A retry finds the
 * tools already moved and queues nothing again: deliveries whose start failed are started by the
 * delivery sweep (activities/webhook-sweep.ts).
 */
export function createMcpToolSyncActivities(deps: McpToolSyncDeps) {
  return {
    /** Ids of active servers after `afterId`, in id order; with `walk`, keeping its place across runs (core/walk-cursors.ts). */
    async listActiveMcpServers(input: { afterId: string | null; limit: number; walk?: WalkStep }): Promise<string[]> {
      return walkPage(deps.db, input.walk, input.afterId, (after) => activeServerPage(deps.db, after, input.limit));
    },

    /** Lists one server now and records what changed; safe to retry (a re-listing is idempotent). */
    async syncMcpServer(input: { serverId: string }): Promise<McpServerSyncSummary> {
      const report = await syncRegisteredServer(deps.db, { sealer: deps.sealer, dispatcher: deps.dispatcher, now: () => deps.clock.now(), publicUrl: deps.publicUrl }, input.serverId);
      if (report.outcome === 'skipped') return { serverId: input.serverId, outcome: 'skipped', toolsChanged: 0, alertsQueued: 0 };
      await deps.startDeliveries(report.deliveries);
      return { serverId: input.serverId, outcome: report.outcome, toolsChanged: report.outcome === 'synced' ? report.changed : 0, alertsQueued: report.deliveries.length };
    },
  };
}

export type McpToolSyncActivities = ReturnType<typeof createMcpToolSyncActivities>;
