import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';

/** Tool-gateway servers (spec 2.6 `mcp_servers`, issue 15). */
export const MCP_SERVER_STATUSES = ['active', 'disabled'] as const;
/**
 * How the server was reached: the streamable HTTP transport (MCP 2025-03-26 and later), or the
 * older HTTP+SSE transport (MCP 2024-11-05). Null until the first successful listing.
 */
export const MCP_PROTOCOL_ERAS = ['streamable_http', 'http_sse'] as const;
export type McpProtocolEra = (typeof MCP_PROTOCOL_ERAS)[number];
/** `unknown` before the first sync; `degraded` after one failed sync; `failing` after several in a row. */
export const MCP_SERVER_HEALTH = ['unknown', 'healthy', 'degraded', 'failing'] as const;
export const MCP_AUTH_TYPES = ['none', 'headers'] as const;

export const MCP_DEFAULT_TIMEOUT_MS = 60_000;
export const MCP_DEFAULT_MAX_RESULT_BYTES = 1_048_576;
export const MCP_DEFAULT_RATE_LIMIT_RPM = 300;

export const mcpServers = pgTable(
  'mcp_servers',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    slug: text('slug').notNull(),
    name: text('name').notNull(),
    url: text('url').notNull(),
    authType: text('auth_type', { enum: MCP_AUTH_TYPES }).notNull().default('none'),
    /** Names only, for reads; the values live sealed in `credential_sealed`. */
    headerNames: text('header_names').array().notNull().default([]),
    /** A sealed JSON object `{<header name>: <value>}`; null for `{type: 'none'}`. */
    credentialSealed: text('credential_sealed'),
    credentialUpdatedAt: timestamp('credential_updated_at', { withTimezone: true }).notNull().defaultNow(),
    /** Empty means every project (and every environment, below). */
    projectIds: text('project_ids').array().notNull().default([]),
    environments: text('environments').array().notNull().default([]),
    readsPrivateData: boolean('reads_private_data').notNull().default(false),
    readsUntrustedContent: boolean('reads_untrusted_content').notNull().default(false),
    canSendDataOut: boolean('can_send_data_out').notNull().default(false),
    timeoutMs: integer('timeout_ms').notNull().default(MCP_DEFAULT_TIMEOUT_MS),
    maxResultBytes: integer('max_result_bytes').notNull().default(MCP_DEFAULT_MAX_RESULT_BYTES),
    rateLimitRpm: integer('rate_limit_rpm').notNull().default(MCP_DEFAULT_RATE_LIMIT_RPM),
    status: text('status', { enum: MCP_SERVER_STATUSES }).notNull().default('active'),
    protocolEra: text('protocol_era', { enum: MCP_PROTOCOL_ERAS }),
    health: text('health', { enum: MCP_SERVER_HEALTH }).notNull().default('unknown'),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    lastSyncedAt: timestamp('last_synced_at', { withTimezone: true }),
    lastSyncError: text('last_sync_error'),
    ...resourceColumns(),
  },
  (t) => [uniqueIndex('mcp_servers_org_slug').on(t.orgId, t.slug), index('mcp_servers_status').on(t.status, t.id)],
);

/**
 * Spec 3.2: `pending`, `approved`, `changed`, and `blocked` (the spec names blocked tools by
 * effect only; this is our name for it).
 */
export const MCP_TOOL_STATES = ['pending', 'approved', 'changed', 'blocked'] as const;
export type McpToolState = (typeof MCP_TOOL_STATES)[number];
export const MCP_ACCESS_CLASSES = ['read', 'write'] as const;
export type McpAccessClass = (typeof MCP_ACCESS_CLASSES)[number];

/** A tool definition as listed (the MCP `Tool` object without `_meta`). */
export type McpToolDefinition = Record<string, unknown> & { name: string };
export type McpScanFinding = { kind: string; detail: string };

export const mcpServerTools = pgTable(
  'mcp_server_tools',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    serverId: text('server_id').notNull().references(() => mcpServers.id, { onDelete: 'cascade' }),
    upstreamName: text('upstream_name').notNull(),
    /** The name agents see; null when it would clash with another tool's (approve then gives `mcp_tool_name_clash`). */
    exposedName: text('exposed_name'),
    state: text('state', { enum: MCP_TOOL_STATES }).notNull().default('pending'),
    accessClass: text('access_class', { enum: MCP_ACCESS_CLASSES }),
    suggestedClass: text('suggested_class', { enum: MCP_ACCESS_CLASSES }).notNull(),
    /** The latest listed definition and its hash. */
    definition: jsonb('definition').$type<McpToolDefinition>().notNull(),
    definitionSha256: text('definition_sha256').notNull(),
    /** What agents are served: only ever a definition an admin approved by its hash. */
    approvedDefinition: jsonb('approved_definition').$type<McpToolDefinition | null>(),
    approvedSha256: text('approved_sha256'),
    scanFindings: jsonb('scan_findings').$type<McpScanFinding[]>().notNull().default([]),
    /** False once the server stopped listing it; approve then gives `mcp_tool_removed`. */
    listed: boolean('listed').notNull().default(true),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true }).notNull().defaultNow(),
    changedAt: timestamp('changed_at', { withTimezone: true }),
    approvedAt: timestamp('approved_at', { withTimezone: true }),
    blockedAt: timestamp('blocked_at', { withTimezone: true }),
    removedAt: timestamp('removed_at', { withTimezone: true }),
    ...resourceColumns(),
  },
  (t) => [
    uniqueIndex('mcp_server_tools_server_name').on(t.serverId, t.upstreamName),
    uniqueIndex('mcp_server_tools_org_exposed').on(t.orgId, t.exposedName).where(sql`${t.exposedName} is not null`),
    index('mcp_server_tools_org').on(t.orgId),
  ],
);

export const MCP_GRANT_MODES = ['read', 'all', 'selected'] as const;
export type McpGrantMode = (typeof MCP_GRANT_MODES)[number];

/** Which servers' tools a key may call; stored against the key's lineage so rotation keeps it. */
export const mcpKeyGrants = pgTable(
  'mcp_key_grants',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    keyLineageId: text('key_lineage_id').notNull(),
    /** The key named when the grant was made (reads show the lineage's current key). */
    keyId: text('key_id').notNull(),
    /** The key's project, for project-restricted tokens. */
    projectId: text('project_id').notNull(),
    serverId: text('server_id').notNull().references(() => mcpServers.id, { onDelete: 'cascade' }),
    mode: text('mode', { enum: MCP_GRANT_MODES }).notNull(),
    /** Upstream names, for `selected`. */
    tools: text('tools').array().notNull().default([]),
    /** Whether the writer confirmed that this grant completes the three risk labels for the key. */
    trifectaConfirmed: boolean('trifecta_confirmed').notNull().default(false),
    ...resourceColumns(),
  },
  (t) => [uniqueIndex('mcp_key_grants_lineage_server').on(t.keyLineageId, t.serverId), index('mcp_key_grants_org').on(t.orgId)],
);
