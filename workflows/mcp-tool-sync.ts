import { proxyActivities } from '@temporalio/workflow';
import type { McpServerSyncSummary, McpToolSyncActivities } from '../activities/mcp-tool-sync';
import { MCP_TOOL_SYNC_MAX_PAGES, MCP_TOOL_SYNC_PAGE_SIZE, type McpToolSyncResult } from './definitions';

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

/**
 * One run of the tool-gateway sync (started by the `gw-mcp-tool-sync` schedule): walks the
 * active servers in id order, a page at a time, listing each page's servers side by side.
 */
export async function mcpToolSync(): Promise<McpToolSyncResult> {
  const result: McpToolSyncResult = { servers: 0, synced: 0, failed: 0, skipped: 0, toolsChanged: 0, alertsQueued: 0 };
  let afterId: string | null = null;
  for (let page = 0; page < MCP_TOOL_SYNC_MAX_PAGES; page++) {
    const ids: string[] = await listActiveMcpServers({ afterId, limit: MCP_TOOL_SYNC_PAGE_SIZE });
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
    if (ids.length < MCP_TOOL_SYNC_PAGE_SIZE) break;
    afterId = ids[ids.length - 1]!;
  }
  return result;
}
