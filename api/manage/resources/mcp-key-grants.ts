import { and, desc, eq, inArray, isNull } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../../core/db/client';
import { gatewayKeys, MCP_GRANT_MODES, mcpKeyGrants, mcpServers, mcpServerTools } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { lineageRiskLabels, RISK_LABELS, type McpGrantRow } from '../../../core/mcp/grants';
import { unixTime } from './fields';
import { mcpGate } from './mcp-gates';
import { inProjects, newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

/** A grant with the lineage's current key (rotation moves it; the grant stays). */
type GrantRow = McpGrantRow & { currentKeyId: string };

const toolsField = z.array(z.string().min(1).max(128)).max(200).describe('Upstream tool names, for `selected`.');
const createSchema = z.strictObject({
  key_id: z.string().min(1).max(64),
  server_id: z.string().min(1).max(64),
  mode: z.enum(MCP_GRANT_MODES),
  tools: toolsField.optional(),
  confirm_trifecta: z.boolean().optional().describe('Confirms a grant that gives the key all three risk labels across its servers.'),
});
const patchSchema = z.strictObject({ mode: z.enum(MCP_GRANT_MODES), tools: toolsField, confirm_trifecta: z.boolean() }).partial();

const readSchema = z.object({
  key_id: z.string().describe('The key lineage\'s current key.'),
  key_lineage_id: z.string(),
  server_id: z.string(),
  mode: z.enum(MCP_GRANT_MODES),
  tools: z.array(z.string()),
  trifecta_confirmed: z.boolean(),
  created_at: unixTime,
  updated_at: unixTime,
});

/** Each grant with its lineage's newest unrevoked key (the stored key when every one is revoked). */
async function withCurrentKeys(db: Executor, rows: McpGrantRow[]): Promise<GrantRow[]> {
  const lineages = [...new Set(rows.map((r) => r.keyLineageId))];
  if (lineages.length === 0) return [];
  const keys = await db.select({ id: gatewayKeys.id, lineageId: gatewayKeys.lineageId }).from(gatewayKeys)
    .where(and(inArray(gatewayKeys.lineageId, lineages), isNull(gatewayKeys.revokedAt)))
    .orderBy(desc(gatewayKeys.createdAt), desc(gatewayKeys.id));
  const current = new Map<string, string>();
  for (const k of keys) if (!current.has(k.lineageId)) current.set(k.lineageId, k.id);
  return rows.map((r) => ({ ...r, currentKeyId: current.get(r.keyLineageId) ?? r.keyId }));
}

/** `selected` names tools; the other modes name none. Each must be an approved tool of the server. */
async function checkTools(db: Executor, serverId: string, mode: McpGrantRow['mode'], tools: string[] | undefined): Promise<string[]> {
  const names = [...new Set(tools ?? [])];
  if (mode !== 'selected') {
    if (names.length > 0) throw new GatewayError('invalid_request', 'Invalid `tools`: only a `selected` grant names tools.');
    return [];
  }
  if (names.length === 0) throw new GatewayError('invalid_request', 'Invalid `tools`: a `selected` grant names at least one tool.');
  const known = await db.select({ name: mcpServerTools.upstreamName, state: mcpServerTools.state, listed: mcpServerTools.listed }).from(mcpServerTools)
    .where(and(eq(mcpServerTools.serverId, serverId), inArray(mcpServerTools.upstreamName, names)));
  for (const name of names) {
    const tool = known.find((k) => k.name === name);
    if (!tool) throw new GatewayError('invalid_request', `Invalid \`tools\`: the server lists no tool \`${name}\`.`);
    // A tool the server stopped listing cannot be granted, as it cannot be approved (spec 7).
    if (!tool.listed) throw new GatewayError('mcp_tool_removed', `The server no longer lists \`${name}\`; it cannot be granted.`);
    if (tool.state !== 'approved') throw new GatewayError('mcp_tool_not_approved', `Tool \`${name}\` is ${tool.state}, not approved; approve it before granting it.`);
  }
  return names.sort();
}

async function checkTrifecta(call: ResourceCall, lineageId: string, serverId: string, confirmed: boolean | undefined): Promise<boolean> {
  const labels = await lineageRiskLabels(call.db, call.principal.orgId, lineageId, serverId);
  const complete = RISK_LABELS.every((l) => labels.has(l));
  if (complete && confirmed !== true) {
    throw new GatewayError('mcp_trifecta_unconfirmed', `With this grant the key would reach servers labelled ${RISK_LABELS.join(', ')}: private data, untrusted content and a way to send data out. Send \`confirm_trifecta: true\` to grant it anyway.`);
  }
  return complete;
}

export const mcpKeyGrantsResource: ResourceType<GrantRow> = {
  type: 'mcp_key_grants',
  object: 'mcp_key_grant',
  scope: 'mcp',
  table: mcpKeyGrants,
  readSchema,
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    const row = await selectOne(db.select().from(mcpKeyGrants).where(and(eq(mcpKeyGrants.orgId, orgId), eq(mcpKeyGrants.id, id))), forUpdate);
    return row ? (await withCurrentKeys(db, [row]))[0]! : null;
  },

  async list(db, principal, page) {
    const listed = await newestFirst<McpGrantRow>(db, mcpKeyGrants, and(eq(mcpKeyGrants.orgId, principal.orgId), inProjects(principal.projectIds, mcpKeyGrants.projectId)), page);
    const rows = await withCurrentKeys(db, listed.map((l) => l.row));
    return rows.map((row, i) => ({ row, cursor: listed[i]!.cursor }));
  },

  projectOf: (row) => row.projectId,

  async create(call, input: z.infer<typeof createSchema>) {
    const orgId = call.principal.orgId;
    const [key] = await call.db.select().from(gatewayKeys).where(and(eq(gatewayKeys.orgId, orgId), eq(gatewayKeys.id, input.key_id), isNull(gatewayKeys.revokedAt)));
    if (!key || (call.principal.projectIds && !call.principal.projectIds.includes(key.projectId))) {
      throw new GatewayError('invalid_request', `Invalid \`key_id\`: no active gateway key \`${input.key_id}\`.`);
    }
    const [server] = await call.db.select().from(mcpServers).where(and(eq(mcpServers.orgId, orgId), eq(mcpServers.id, input.server_id)));
    if (!server) throw new GatewayError('invalid_request', `Invalid \`server_id\`: no tool-gateway server \`${input.server_id}\`.`);
    if (server.projectIds.length > 0 && !server.projectIds.includes(key.projectId)) {
      throw new GatewayError('invalid_request', 'The key\'s project is not among the server\'s `project_ids`; its keys cannot reach it.');
    }
    const tools = await checkTools(call.db, server.id, input.mode, input.tools);
    const trifecta = await checkTrifecta(call, key.lineageId, server.id, input.confirm_trifecta);
    const [row] = await call.db.insert(mcpKeyGrants).values({
      id: newId('mcpg', call.now.getTime()), orgId, keyLineageId: key.lineageId, keyId: key.id, projectId: key.projectId,
      serverId: server.id, mode: input.mode, tools, trifectaConfirmed: trifecta, createdAt: call.now, updatedAt: call.now,
    }).returning();
    return {
      row: (await withCurrentKeys(call.db, [row!]))[0]!,
      auditDetail: { key_id: key.id, key_lineage_id: key.lineageId, server_id: server.id, mode: input.mode, tools, trifecta_confirmed: trifecta },
    };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    const mode = input.mode ?? row.mode;
    const tools = input.tools !== undefined || input.mode !== undefined
      ? await checkTools(call.db, row.serverId, mode, input.tools ?? (mode === 'selected' ? row.tools : undefined))
      : row.tools;
    // The servers a lineage reaches do not change by a patch; a confirmation is recorded if given.
    const trifecta = input.confirm_trifecta !== undefined ? await checkTrifecta(call, row.keyLineageId, row.serverId, input.confirm_trifecta) : row.trifectaConfirmed;
    return { mode, tools, trifectaConfirmed: trifecta };
  },

  remove: async () => 'delete',

  uniqueConflict: (constraint) =>
    constraint === 'mcp_key_grants_lineage_server'
      ? new GatewayError('invalid_request', 'This key already has a grant on that server; change it with PATCH.')
      : undefined,

  ...mcpGate((write) => (write.kind === 'remove' ? null : 'business')),

  present: (row) => ({
    key_id: row.currentKeyId,
    key_lineage_id: row.keyLineageId,
    server_id: row.serverId,
    mode: row.mode,
    tools: row.tools,
    trifecta_confirmed: row.trifectaConfirmed,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
