import { and, eq, inArray } from 'drizzle-orm';
import type { Executor } from '../db/client';
import { mcpKeyGrants, mcpServers, orgSettings, type McpAccessClass } from '../db/schema';

export type McpGrantRow = typeof mcpKeyGrants.$inferSelect;

/**
 * The three risk labels of the "lethal trifecta" (spec 2.6): a key that can reach private data,
 * be exposed to untrusted content and send data out can be steered by that content into sending
 * the data away. Named by the server fields that carry them.
 */
export const RISK_LABELS = ['reads_private_data', 'reads_untrusted_content', 'can_send_data_out'] as const;
export type RiskLabel = (typeof RISK_LABELS)[number];

export function riskLabelsOf(server: Labelled): RiskLabel[] {
  return [
    ...(server.readsPrivateData ? ['reads_private_data' as const] : []),
    ...(server.readsUntrustedContent ? ['reads_untrusted_content' as const] : []),
    ...(server.canSendDataOut ? ['can_send_data_out' as const] : []),
  ];
}

/** Every grant of a key lineage (rotation keeps them), with its server's id. */
export async function grantsForLineage(db: Executor, orgId: string, keyLineageId: string): Promise<McpGrantRow[]> {
  return db.select().from(mcpKeyGrants).where(and(eq(mcpKeyGrants.orgId, orgId), eq(mcpKeyGrants.keyLineageId, keyLineageId)));
}

/** The grant of one lineage on one server, or null: what the agent endpoint asks per call. */
export async function grantFor(db: Executor, keyLineageId: string, serverId: string): Promise<McpGrantRow | null> {
  const [row] = await db.select().from(mcpKeyGrants).where(and(eq(mcpKeyGrants.keyLineageId, keyLineageId), eq(mcpKeyGrants.serverId, serverId)));
  return row ?? null;
}

/**
 * Whether a grant lets its key call a tool: `all` every approved tool, `read` the tools approved
 * with access class `read`, `selected` the upstream names it lists.
 */
export function grantAllows(grant: Pick<McpGrantRow, 'mode' | 'tools'>, tool: { upstreamName: string; accessClass: McpAccessClass | null }): boolean {
  switch (grant.mode) {
    case 'all': return true;
    case 'read': return tool.accessClass === 'read';
    case 'selected': return grant.tools.includes(tool.upstreamName);
  }
}

/**
 * The risk labels a lineage would hold across its servers with one grant added or changed
 * (`serverId`): what the trifecta check compares against all three.
 */
export async function lineageRiskLabels(db: Executor, orgId: string, keyLineageId: string, withServerId: string): Promise<Set<RiskLabel>> {
  const servers = await db.select({ id: mcpServers.id, readsPrivateData: mcpServers.readsPrivateData, readsUntrustedContent: mcpServers.readsUntrustedContent, canSendDataOut: mcpServers.canSendDataOut })
    .from(mcpServers)
    .where(eq(mcpServers.orgId, orgId));
  const labels = new Set<RiskLabel>();
  const granted = new Set((await grantsForLineage(db, orgId, keyLineageId)).map((g) => g.serverId));
  granted.add(withServerId);
  for (const s of servers) if (granted.has(s.id)) for (const l of riskLabelsOf(s)) labels.add(l);
  return labels;
}

type Labelled = { readsPrivateData: boolean; readsUntrustedContent: boolean; canSendDataOut: boolean };

/**
 * Key lineages that a change of one server's risk labels would give all three labels for the
 * first time: the lineages granted on that server whose servers, with the new labels, cover
 * all three, where they did not before. A label turned on over existing grants then needs the
 * same confirmation a new grant would.
 */
export async function lineagesCompletedByLabels(db: Executor, orgId: string, serverId: string, next: Labelled): Promise<string[]> {
  const onServer = await db.select({ lineage: mcpKeyGrants.keyLineageId }).from(mcpKeyGrants).where(and(eq(mcpKeyGrants.orgId, orgId), eq(mcpKeyGrants.serverId, serverId)));
  if (onServer.length === 0) return [];
  const rows = await db.select({ lineage: mcpKeyGrants.keyLineageId, serverId: mcpServers.id, readsPrivateData: mcpServers.readsPrivateData, readsUntrustedContent: mcpServers.readsUntrustedContent, canSendDataOut: mcpServers.canSendDataOut })
    .from(mcpKeyGrants).innerJoin(mcpServers, eq(mcpServers.id, mcpKeyGrants.serverId))
    .where(and(eq(mcpKeyGrants.orgId, orgId), inArray(mcpKeyGrants.keyLineageId, [...new Set(onServer.map((r) => r.lineage))])));
  const before = new Map<string, Set<RiskLabel>>();
  const after = new Map<string, Set<RiskLabel>>();
  for (const r of rows) {
    for (const l of riskLabelsOf(r)) (before.get(r.lineage) ?? before.set(r.lineage, new Set()).get(r.lineage)!).add(l);
    for (const l of riskLabelsOf(r.serverId === serverId ? next : r)) (after.get(r.lineage) ?? after.set(r.lineage, new Set()).get(r.lineage)!).add(l);
  }
  const complete = (set: Set<RiskLabel> | undefined) => RISK_LABELS.every((l) => set?.has(l));
  return [...after.keys()].filter((lineage) => complete(after.get(lineage)) && !complete(before.get(lineage)));
}

/** Whether the organization allows assistant (tool-gateway) access: false answers `mcp_disabled`. */
export async function mcpAccessEnabled(db: Executor, orgId: string): Promise<boolean> {
  const [row] = await db.select({ enabled: orgSettings.mcpEnabled }).from(orgSettings).where(eq(orgSettings.id, orgId));
  return row?.enabled ?? true;
}
