/**
 * The tool gateway's core (issue 15), shared by the management resources
 * (api/manage/resources/mcp-*.ts), the sync schedule (activities/mcp-tool-sync.ts) and the
 * agent-facing endpoint `/v1/mcp/{server_slug}`:
 *
 * - sessions: `openServerSession(serverRow, {sealer, dispatcher})` opens an SDK `Client` to a
 *   registered server with its sealed credential headers and `timeout_ms`, trying its last
 *   `protocol_era` first (streamable HTTP, else the older HTTP+SSE), through the guarded
 *   dispatcher; `openMcpSession(target, {dispatcher})` does the same for a plain target;
 *   `listAllTools(session, timeoutMs)` pages `tools/list`; `discoverTools` lists within the
 *   listing bounds (bytes, pages, tools) or throws `McpListingTooLarge`.
 * - hashing: `definitionSha256(toolDefinition(listedTool))`, SHA-256 over RFC 8785 JCS.
 * - tools: `servableTools(db, serverId)` are the approved, listed tools with an exposed name;
 *   serve `approvedDefinition` (never `definition`) under `exposedName`, and check `accessClass`.
 * - grants: `grantFor(db, keyLineageId, serverId)` and `grantAllows(grant, tool)`;
 *   `grantsForLineage(db, orgId, keyLineageId)` lists a lineage's grants.
 * - servers: `findServerBySlug`, `serverReachableBy(server, key)`; `mcpAccessEnabled(db, orgId)`
 *   false means the organization turned assistant access off (`mcp_disabled`).
 */
export { discoverTools, listAllTools, MCP_CLIENT_INFO, MCP_MAX_LISTED_TOOLS, MCP_MAX_LISTING_BYTES, MCP_MAX_TOOL_PAGES, McpConnectError, McpListingTooLarge, openMcpSession, openServerSession, type McpSession, type McpTarget, type RegisteredMcpServer } from './client';
export { canonicalJson, definitionSha256, toolDefinition } from './canonical';
export { checkCredential, mcpCredentialSchema, MCP_MAX_CREDENTIAL_HEADERS, openServerCredential, sealServerCredential } from './credential';
export { grantAllows, grantFor, grantsForLineage, lineageRiskLabels, mcpAccessEnabled, RISK_LABELS, riskLabelsOf, type McpGrantRow, type RiskLabel } from './grants';
export { findServerBySlug, serverReachableBy } from './servers';
export { activeServerPage, MCP_FAILING_AFTER_FAILURES, syncRegisteredServer, type McpServerRow, type ServerSyncReport } from './sync';
export { applyToolListing, exposedNameFor, MCP_EXPOSED_NAME_MAX, scanDefinition, servableTools, suggestedClassOf, type McpToolRow } from './tools';
