import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { MCP_ACCESS_CLASSES, MCP_TOOL_STATES, mcpServerTools } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { toolSchemaProblem } from '../../../core/mcp/agent-call';
import { resolveToolChanged } from '../../../core/mcp/sync';
import type { McpToolRow } from '../../../core/mcp/tools';
import { withErrorCode } from '../../validation';
import { unixTime } from './fields';
import { mcpGate } from './mcp-gates';
import { newestFirst, selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

const approveSchema = z.strictObject({
  access_class: z.enum(MCP_ACCESS_CLASSES),
  // Spec 3.2: approve needs the current hash; anything else given (malformed too) is a stale one.
  expected_sha256: withErrorCode(z.string().regex(/^[0-9a-f]{64}$/, 'the lowercase hex `definition_sha256` you reviewed'), 'mcp_tool_definition_stale'),
});

const readSchema = z.object({
  server_id: z.string(),
  upstream_name: z.string(),
  exposed_name: z.string().nullable().describe('The name agents see; null when it would clash (approve gives `mcp_tool_name_clash`).'),
  state: z.enum(MCP_TOOL_STATES),
  access_class: z.enum(MCP_ACCESS_CLASSES).nullable(),
  suggested_class: z.enum(MCP_ACCESS_CLASSES),
  definition: z.record(z.string(), z.unknown()).describe('The latest listed definition.'),
  definition_sha256: z.string().describe('SHA-256 (hex) of the RFC 8785 canonical JSON of `definition`.'),
  approved_definition: z.record(z.string(), z.unknown()).nullable().describe('What agents are served.'),
  approved_sha256: z.string().nullable(),
  scan_findings: z.array(z.object({ kind: z.string(), detail: z.string() })),
  listed: z.boolean().describe('False once the server stopped listing the tool.'),
  first_seen_at: unixTime,
  changed_at: unixTime.nullable(),
  approved_at: unixTime.nullable(),
  blocked_at: unixTime.nullable(),
  removed_at: unixTime.nullable(),
  created_at: unixTime,
  updated_at: unixTime,
});

const at = (d: Date | null) => (d ? unix(d) : null);

/**
 * Tools of tool-gateway servers (spec 2.6, 3.2): made by discovery, never created or patched;
 * moved by approve, block and unblock, each needing a token whose creator is owner or admin.
 */
export const mcpServerToolsResource: ResourceType<McpToolRow> = {
  type: 'mcp_server_tools',
  object: 'mcp_server_tool',
  scope: 'mcp',
  table: mcpServerTools,
  readSchema,

  find: (db, orgId, id, { forUpdate }) => selectOne(db.select().from(mcpServerTools).where(and(eq(mcpServerTools.orgId, orgId), eq(mcpServerTools.id, id))), forUpdate),

  list: (db, principal, page) => newestFirst(db, mcpServerTools, eq(mcpServerTools.orgId, principal.orgId), page),

  ...mcpGate((write) => (write.kind === 'action' && write.action === 'block' ? null : 'business')),

  actions: {
    approve: {
      summary: 'Approve the tool\'s current definition, pinned by its hash, with an access class.',
      schema: approveSchema,
      ifMatch: 'optional',
      adminCreator: true,
      async run(call, row, input: z.infer<typeof approveSchema>) {
        if (!row.listed) throw new GatewayError('mcp_tool_removed', `The server no longer lists \`${row.upstreamName}\`; it cannot be approved.`);
        if (row.state === 'blocked') throw new GatewayError('invalid_request', 'The tool is blocked; unblock it first.');
        if (input.expected_sha256 !== row.definitionSha256) {
          throw new GatewayError('mcp_tool_definition_stale', 'The tool\'s definition changed since the one you reviewed: `expected_sha256` is not its current `definition_sha256`. Read it again.', {
            details: { current_sha256: row.definitionSha256 },
          });
        }
        if (row.exposedName === null) {
          throw new GatewayError('mcp_tool_name_clash', `The tool's exposed name would clash with another tool's; rename the tool upstream.`);
        }
        // Its schemas run on the API's event loop at every call: one past the bounds, or that
        // does not compile, is refused here rather than on an agent's call (issue 52).
        const schemaProblem = toolSchemaProblem(row.definition);
        if (schemaProblem) throw new GatewayError('invalid_request', `Invalid ${schemaProblem}. Change the tool's schema upstream and sync again.`);
        await resolveToolChanged(call.db, row, call.now);
        return {
          changes: { state: 'approved', accessClass: input.access_class, approvedDefinition: row.definition, approvedSha256: row.definitionSha256, approvedAt: call.now },
          auditDetail: { access_class: input.access_class, approved_sha256: row.definitionSha256, from_state: row.state },
        };
      },
    },
    block: {
      summary: 'Block the tool: hidden from agents and refused whatever the server lists.',
      schema: z.strictObject({}),
      ifMatch: 'optional',
      adminCreator: true,
      async run(call, row) {
        if (row.state === 'blocked') return {};
        await resolveToolChanged(call.db, row, call.now);
        return { changes: { state: 'blocked', blockedAt: call.now }, auditDetail: { from_state: row.state } };
      },
    },
    unblock: {
      summary: 'Unblock the tool: `approved` if its definition still equals the approved one, else `pending`.',
      schema: z.strictObject({}),
      ifMatch: 'optional',
      adminCreator: true,
      async run(_call, row) {
        if (row.state !== 'blocked') return {};
        const state = row.approvedSha256 !== null && row.approvedSha256 === row.definitionSha256 ? 'approved' : 'pending';
        return { changes: { state, blockedAt: null }, auditDetail: { to_state: state } };
      },
    },
  },

  present: (row) => ({
    server_id: row.serverId,
    upstream_name: row.upstreamName,
    exposed_name: row.exposedName,
    state: row.state,
    access_class: row.accessClass,
    suggested_class: row.suggestedClass,
    definition: row.definition,
    definition_sha256: row.definitionSha256,
    approved_definition: row.approvedDefinition,
    approved_sha256: row.approvedSha256,
    scan_findings: row.scanFindings,
    listed: row.listed,
    first_seen_at: unix(row.firstSeenAt),
    changed_at: at(row.changedAt),
    approved_at: at(row.approvedAt),
    blocked_at: at(row.blockedAt),
    removed_at: at(row.removedAt),
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
