import { and, asc, eq, gt } from 'drizzle-orm';
import type { Dispatcher } from 'undici';
import type { Sealer } from '../crypto/sealing';
import type { Database, Executor } from '../db/client';
import { mcpServers, type McpProtocolEra } from '../db/schema';
import type { QueuedDelivery } from '../webhooks/fan-out';
import { fingerprintOf, type Detection } from '../findings/detection';
import { recordDetection, resolveFinding, type NotifyOptions } from '../findings/store';
import { discoverTools, McpConnectError } from './client';
import { openServerCredential } from './credential';
import { applyToolListing, type ListingOutcome } from './tools';

export type McpServerRow = typeof mcpServers.$inferSelect;

/** Failed syncs in a row after which a server's health is `failing` and `mcp.server_failing` is raised. */
export const MCP_FAILING_AFTER_FAILURES = 2;

/** What a failed listing is recorded as: short, one line, no header values (they are never in errors we make). */
export function syncErrorText(err: unknown): string {
  const text = err instanceof McpConnectError ? err.message : (err as { message?: string })?.message ?? String(err);
  return text.replace(/\s+/g, ' ').slice(0, 500);
}

/** Server columns after a successful listing. */
export function syncSucceeded(protocolEra: McpProtocolEra, now: Date) {
  return { protocolEra, health: 'healthy' as const, consecutiveFailures: 0, lastSyncedAt: now, lastSyncError: null };
}

/** Server columns after a failed listing; `last_synced_at` stays the last successful one. */
export function syncFailed(server: Pick<McpServerRow, 'consecutiveFailures'>, error: string) {
  const failures = server.consecutiveFailures + 1;
  return { health: failures >= MCP_FAILING_AFTER_FAILURES ? 'failing' as const : 'degraded' as const, consecutiveFailures: failures, lastSyncError: error };
}

/** An approved tool whose definition changed (issue 15), as a finding about its server (issue 22). */
function toolChangedDetection(server: McpServerRow, tool: ListingOutcome['changed'][number], now: Date): Detection {
  return {
    orgId: server.orgId, type: 'mcp.tool_changed', severity: 'warning',
    title: `Tool ${tool.upstreamName} of MCP server ${server.slug} changed`,
    summary: `The approved tool ${tool.upstreamName} on ${server.slug} now lists a different definition; agents keep the approved one until it is approved again.`,
    scope: { kind: 'mcp_server', id: server.id }, subject: { tool: tool.upstreamName }, window: { from: now, to: now },
    observed: null, expected: null, threshold: null,
    evidence: {
      server_slug: server.slug, tool_id: tool.id, upstream_name: tool.upstreamName, exposed_name: tool.exposedName,
      approved_sha256: tool.approvedSha256, definition_sha256: tool.definitionSha256,
    },
  };
}

function serverFailingDetection(server: McpServerRow, error: string, failures: number, now: Date): Detection {
  return {
    orgId: server.orgId, type: 'mcp.server_failing', severity: 'critical',
    title: `MCP server ${server.slug} is failing`,
    summary: `${failures} listings of ${server.slug} in a row failed: ${error}`.slice(0, 300),
    scope: { kind: 'mcp_server', id: server.id }, subject: {}, window: { from: server.lastSyncedAt ?? now, to: now },
    observed: failures, expected: 0, threshold: MCP_FAILING_AFTER_FAILURES,
    evidence: { server_slug: server.slug, url: server.url, consecutive_failures: failures, last_sync_error: error, last_synced_at: server.lastSyncedAt?.toISOString() ?? null },
  };
}

export type ServerSyncReport =
  | { outcome: 'skipped'; serverId: string }
  | { outcome: 'synced'; serverId: string; added: number; changed: number; removed: number; deliveries: QueuedDelivery[] }
  | { outcome: 'failed'; serverId: string; error: string; deliveries: QueuedDelivery[] };

/**
 * The `mcp.*` findings end when their cause does: a server listing again (scheduled or manual
 * sync) is no longer failing; a changed tool approved again or blocked is decided. Each later
 * failure or change then opens a new finding and is notified again.
 */
export async function resolveServerFailing(db: Executor, server: Pick<McpServerRow, 'orgId' | 'id'>, now: Date): Promise<void> {
  await resolveFinding(db, server.orgId, fingerprintOf({ type: 'mcp.server_failing', scope: { kind: 'mcp_server', id: server.id }, subject: {} }), now);
}

export async function resolveToolChanged(db: Executor, tool: { orgId: string; serverId: string; upstreamName: string }, now: Date): Promise<void> {
  await resolveFinding(db, tool.orgId, fingerprintOf({ type: 'mcp.tool_changed', scope: { kind: 'mcp_server', id: tool.serverId }, subject: { tool: tool.upstreamName } }), now);
}

/** Raises one listing's findings (one `mcp.tool_changed` per tool that left `approved`) in the caller's transaction. */
async function raiseToolChanged(db: Executor, server: McpServerRow, outcome: ListingOutcome, now: Date, notify: NotifyOptions): Promise<QueuedDelivery[]> {
  const queued: QueuedDelivery[] = [];
  for (const tool of outcome.changed) queued.push(...(await recordDetection(db, toolChangedDetection(server, tool, now), now, notify)).deliveries);
  return queued;
}

/**
 * One scheduled re-listing of a registered server (issue 15 sync schedule): lists its tools with
 * its credential outside any transaction, then in one transaction applies the listing (3.2 moves),
 * records health and queues the alerts: `mcp.tool_changed` per approved tool that changed,
 * `mcp.server_failing` when the server turns `failing`. A server disabled, deleted or given a new
 * URL or credential meanwhile is skipped (the next run lists it afresh). Does not bump the server's
 * `version`: sync bookkeeping is read-only to the customer and must not break their If-Match.
 * The caller starts the answered deliveries after this returns (DESIGN 6.9).
 */
export async function syncRegisteredServer(db: Database, deps: { sealer: Sealer; dispatcher: Dispatcher; now(): Date; publicUrl: string }, serverId: string): Promise<ServerSyncReport> {
  const notify = { publicUrl: deps.publicUrl };
  const [before] = await db.select().from(mcpServers).where(eq(mcpServers.id, serverId));
  if (!before || before.status !== 'active') return { outcome: 'skipped', serverId };
  let listing: Awaited<ReturnType<typeof discoverTools>> | null = null;
  let error = '';
  try {
    listing = await discoverTools({ url: before.url, headers: openServerCredential(deps.sealer, before), timeoutMs: before.timeoutMs, protocolEra: before.protocolEra }, deps);
  } catch (err) {
    error = syncErrorText(err);
  }
  return db.transaction(async (tx) => {
    const [server] = await tx.select().from(mcpServers).where(eq(mcpServers.id, serverId)).for('update');
    if (!server || server.status !== 'active' || server.url !== before.url || server.credentialSealed !== before.credentialSealed) return { outcome: 'skipped' as const, serverId };
    const now = deps.now();
    if (listing) {
      const outcome = await applyToolListing(tx, server, listing.tools, now);
      await tx.update(mcpServers).set(syncSucceeded(listing.protocolEra, now)).where(eq(mcpServers.id, serverId));
      const deliveries = await raiseToolChanged(tx, server, outcome, now, notify);
      await resolveServerFailing(tx, server, now);
      return { outcome: 'synced' as const, serverId, added: outcome.added.length, changed: outcome.changed.length, removed: outcome.removed.length, deliveries };
    }
    const failed = syncFailed(server, error);
    await tx.update(mcpServers).set(failed).where(eq(mcpServers.id, serverId));
    const turnedFailing = failed.health === 'failing' && server.health !== 'failing';
    const deliveries = turnedFailing
      ? (await recordDetection(tx, serverFailingDetection(server, error, failed.consecutiveFailures, now), now, notify)).deliveries
      : [];
    return { outcome: 'failed' as const, serverId, error, deliveries };
  });
}

/** A page of active servers across organizations, in id order after `afterId`: what the schedule walks. */
export async function activeServerPage(db: Executor, afterId: string | null, limit: number): Promise<string[]> {
  const rows = await db.select({ id: mcpServers.id }).from(mcpServers)
    .where(and(eq(mcpServers.status, 'active'), afterId ? gt(mcpServers.id, afterId) : undefined))
    .orderBy(asc(mcpServers.id)).limit(limit);
  return rows.map((r) => r.id);
}
