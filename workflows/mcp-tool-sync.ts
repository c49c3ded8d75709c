import { continueAsNew, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { McpServerSyncSummary, McpToolSyncActivities } from '../activities/mcp-tool-sync';
import type { WalkActivities } from '../activities/walks';
import { infraRetryPolicy, MCP_TOOL_SYNC_HISTORY_EVENTS, MCP_TOOL_SYNC_PAGE_SIZE, WALK_KEEPS_PLACE, type McpToolSyncResult } from './definitions';

const { listActiveMcpServers } = proxyActivities<McpToolSyncActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

// One server's listing is bounded by its timeout_ms (at most 5 minutes) per request; a failure is
// recorded as the server's health, not retried here (the next run lists it again).
const { syncMcpServer } = proxyActivities<McpToolSyncActivities>({
  startToCloseTimeout: '12 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 3 },
});

const { endWalk } = proxyActivities<WalkActivities>({ startToCloseTimeout: '1 minute', retry: infraRetryPolicy() });

/** Runs that may continue as new (issue 34) record this patch, unless their input says so already. */
export const MCP_SYNC_CONTINUES_AS_NEW = 'mcp-sync-continues-as-new';
/** The page bound of runs before issue 34 (`MCP_TOOL_SYNC_MAX_PAGES` then). */
const OLD_MAX_PAGES = 500;

/**
 * What a run is told: nothing from its schedule; where to go on, when a run continued as new
 * (the last server synced and the counts so far); page size and history bound, for tests.
 */
export type McpToolSyncInput = { afterId?: string; totals?: McpToolSyncResult; pageSize?: number; continueAfterEvents?: number };

/**
 * One run of the tool-gateway sync (started by the `gw-mcp-tool-sync` schedule): walks the
 * active servers in id order, a page at a time, listing each page's servers side by side. Every
 * server is synced whatever their number: before the history grows long the run continues as
 * new with its cursor (issue 34), where it once stopped at a fixed number of pages.
 */
export async function mcpToolSync(input?: McpToolSyncInput): Promise<McpToolSyncResult> {
  // Runs of the code before issue 34 took no input and never continued as new: one of 2,000
  // events or more would fail replay at the bound below (issue 55, item 6). A run given input
  // is of the new code; one without asks the patch, which such a run's history does not have.
  const continues = input !== undefined || patched(MCP_SYNC_CONTINUES_AS_NEW);
  // A run that timed out mid-walk left its place; the next one goes on from it (issue 55).
  const walk = patched(WALK_KEEPS_PLACE) ? `${workflowInfo().taskQueue}:mcp-tool-sync` : null;
  let resume = walk !== null && input?.afterId === undefined;
  const result: McpToolSyncResult = input?.totals ?? { servers: 0, synced: 0, failed: 0, skipped: 0, toolsChanged: 0, alertsQueued: 0 };
  let afterId: string | null = input?.afterId ?? null;
  const limit = input?.pageSize ?? MCP_TOOL_SYNC_PAGE_SIZE;
  const maxEvents = input?.continueAfterEvents ?? MCP_TOOL_SYNC_HISTORY_EVENTS;
  let oldPages = 0;
  for (;;) {
    const ids: string[] = await listActiveMcpServers({ afterId, limit, ...(walk !== null && { walk: { walk, resume } }) });
    resume = false;
    // One server whose activity gives up (a listing slower than its timeout allows) is counted
    // failed; it does not fail the run or keep the servers on later pages from being listed.
    const settled = await Promise.allSettled(ids.map((serverId) => syncMcpServer({ serverId })));
    for (const s of settled) {
      result.servers++;
      if (s.status === 'rejected') {
        result.failed++;
        continue;
      }
      const summary: McpServerSyncSummary = s.value;
      result[summary.outcome]++;
      result.toolsChanged += summary.toolsChanged;
      result.alertsQueued += summary.alertsQueued;
    }
    if (ids.length < limit) {
      if (walk !== null) await endWalk({ walk });
      return result;
    }
    afterId = ids[ids.length - 1]!;
    if (!continues) {
      // The old code's bound on pages, kept for its runs.
      if (++oldPages >= OLD_MAX_PAGES) return result;
      continue;
    }
    if (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= maxEvents) {
      return continueAsNew<typeof mcpToolSync>({ ...input, afterId, totals: result });
    }
  }
}
