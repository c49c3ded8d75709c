import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import {
  MCP_AUTH_TYPES, MCP_DEFAULT_MAX_RESULT_BYTES, MCP_DEFAULT_RATE_LIMIT_RPM, MCP_DEFAULT_TIMEOUT_MS, MCP_PROTOCOL_ERAS,
  MCP_SERVER_HEALTH, MCP_SERVER_STATUSES, mcpServers, mcpServerTools,
} from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { discoverTools } from '../../../core/mcp/client';
import { lineagesCompletedByLabels, RISK_LABELS } from '../../../core/mcp/grants';
import { checkCredential, mcpCredentialSchema, openServerCredential, sealServerCredential, type CheckedCredential } from '../../../core/mcp/credential';
import { resolveServerFailing, syncErrorText, syncSucceeded, type McpServerRow } from '../../../core/mcp/sync';
import { applyToolListing } from '../../../core/mcp/tools';
import { checkServiceUrl } from '../../../core/net/service-url';
import { withErrorCode } from '../../validation';
import { checkProjects, nameField, resolveEnvironments, unixTime } from './fields';
import { mcpGate } from './mcp-gates';
import { newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

/** Spec 2.6: 1 to 12 lower-case letters or digits. */
export const MCP_SLUG = /^[a-z0-9]{1,12}$/;

/**
 * Loosely shaped here and checked in full by core/mcp/credential.ts; any problem with it, here
 * or there, answers `invalid_mcp_credential` (the field's code, api/validation.ts).
 */
const credentialField = withErrorCode(z.looseObject({
  type: z.enum(['none', 'headers']),
  headers: z.record(z.string(), z.string()).optional().describe('Up to 8 `{<name>: <value>}` sent on every request to the server.'),
}).describe('Write-only: `{type: "none"}` or `{type: "headers", headers}`. Sealed; reads show only `auth_type` and `header_names`.'), 'invalid_mcp_credential');

const settable = {
  name: nameField,
  url: withErrorCode(z.string().min(1).max(2048).describe('The server\'s public HTTPS URL (its MCP endpoint).'), 'invalid_mcp_server_url'),
  project_ids: z.array(z.string().min(1).max(64)).max(100).describe('Projects whose keys may reach it; empty means all.'),
  environments: z.array(z.string().min(1).max(64)).max(20).describe('Environments whose keys may reach it; empty means all.'),
  reads_private_data: z.boolean(),
  reads_untrusted_content: z.boolean(),
  can_send_data_out: z.boolean(),
  timeout_ms: z.number().int().min(1000).max(300_000),
  max_result_bytes: z.number().int().min(1024).max(5_242_880),
  rate_limit_rpm: z.number().int().min(1).max(50_000),
};

const createSchema = z.strictObject({
  slug: z.string().regex(MCP_SLUG, '1 to 12 lower-case letters or digits'),
  ...settable,
  credential: credentialField.optional(),
  project_ids: settable.project_ids.optional(),
  environments: settable.environments.optional(),
  reads_private_data: settable.reads_private_data.optional(),
  reads_untrusted_content: settable.reads_untrusted_content.optional(),
  can_send_data_out: settable.can_send_data_out.optional(),
  timeout_ms: settable.timeout_ms.optional(),
  max_result_bytes: settable.max_result_bytes.optional(),
  rate_limit_rpm: settable.rate_limit_rpm.optional(),
});
const patchSchema = z.strictObject({
  ...settable,
  status: z.enum(MCP_SERVER_STATUSES),
  confirm_trifecta: z.boolean().describe('Confirms a risk label that gives a key granted on this server all three labels across its servers.'),
}).partial();
const credentialActionSchema = z.strictObject({ credential: credentialField });

const readSchema = z.object({
  slug: z.string(),
  name: z.string(),
  url: z.string(),
  auth_type: z.enum(MCP_AUTH_TYPES),
  header_names: z.array(z.string()).describe('Names of the credential headers; values are never returned.'),
  project_ids: z.array(z.string()),
  environments: z.array(z.string()),
  reads_private_data: z.boolean(),
  reads_untrusted_content: z.boolean(),
  can_send_data_out: z.boolean(),
  timeout_ms: z.number().int(),
  max_result_bytes: z.number().int(),
  rate_limit_rpm: z.number().int(),
  status: z.enum(MCP_SERVER_STATUSES),
  protocol_era: z.enum(MCP_PROTOCOL_ERAS).nullable().describe('`streamable_http` or `http_sse` (the older HTTP+SSE transport): whichever the server answered on.'),
  health: z.enum(MCP_SERVER_HEALTH),
  last_synced_at: unixTime.nullable().describe('The last successful listing.'),
  last_sync_error: z.string().nullable(),
  credential_updated_at: unixTime,
  created_at: unixTime,
  updated_at: unixTime,
});

function checkedUrl(raw: string, call: Pick<ResourceCall, 'services'>): string {
  const verdict = checkServiceUrl(raw, { allowPrivateNetwork: call.services.allowPrivateNetwork });
  if (!verdict.ok) throw new GatewayError('invalid_mcp_server_url', `Invalid \`url\`: it ${verdict.reason}.`);
  return raw;
}

function checkedCredential(raw: unknown): CheckedCredential {
  const parsed = mcpCredentialSchema.safeParse(raw ?? { type: 'none' });
  if (!parsed.success) throw new GatewayError('invalid_mcp_credential', 'Invalid `credential`: give `{type: "none"}` or `{type: "headers", headers: {<name>: <value>}}` with string values and no other fields.');
  const verdict = checkCredential(parsed.data);
  if (!verdict.ok) throw new GatewayError('invalid_mcp_credential', `Invalid \`credential\`: ${verdict.reason}.`);
  return verdict.credential;
}

/** Lists the server's tools with the given headers, or 400 `mcp_discovery_failed`. Outside any transaction. */
async function discover(call: Pick<ResourceCall, 'services'>, target: { url: string; headers: Record<string, string>; timeoutMs: number; protocolEra?: McpServerRow['protocolEra'] }) {
  try {
    return await discoverTools(target, { dispatcher: call.services.outbound });
  } catch (err) {
    throw new GatewayError('mcp_discovery_failed', `Could not list the server's tools: ${syncErrorText(err)}`);
  }
}

type Prepared = { url: string; credential: CheckedCredential; listing: Awaited<ReturnType<typeof discover>> };

export const mcpServersResource: ResourceType<McpServerRow> = {
  type: 'mcp_servers',
  object: 'mcp_server',
  scope: 'mcp',
  table: mcpServers,
  readSchema,
  createSchema,
  patchSchema,

  find: (db, orgId, id, { forUpdate }) => selectOne(db.select().from(mcpServers).where(and(eq(mcpServers.orgId, orgId), eq(mcpServers.id, id))), forUpdate),

  list: (db, principal, page) => newestFirst(db, mcpServers, eq(mcpServers.orgId, principal.orgId), page),

  /** URL and credential rules, then the server's own listing with that credential: no transaction open yet. */
  async precheckCreate(call, input: z.infer<typeof createSchema>): Promise<Prepared> {
    const url = checkedUrl(input.url, call);
    const credential = checkedCredential(input.credential);
    const listing = await discover(call, { url, headers: credential.headers, timeoutMs: input.timeout_ms ?? MCP_DEFAULT_TIMEOUT_MS });
    return { url, credential, listing };
  },

  async create(call, input: z.infer<typeof createSchema>, prepared: Prepared) {
    const orgId = call.principal.orgId;
    const id = newId('mcps', call.now.getTime());
    const environments = (await resolveEnvironments(call.db, orgId, { environments: input.environments })) ?? [];
    const [row] = await call.db.insert(mcpServers).values({
      id,
      orgId,
      slug: input.slug,
      name: input.name,
      url: prepared.url,
      ...sealServerCredential(call.services.sealer, { orgId, id }, prepared.credential),
      credentialUpdatedAt: call.now,
      projectIds: await checkProjects(call.db, orgId, input.project_ids ?? []),
      environments,
      readsPrivateData: input.reads_private_data ?? false,
      readsUntrustedContent: input.reads_untrusted_content ?? false,
      canSendDataOut: input.can_send_data_out ?? false,
      timeoutMs: input.timeout_ms ?? MCP_DEFAULT_TIMEOUT_MS,
      maxResultBytes: input.max_result_bytes ?? MCP_DEFAULT_MAX_RESULT_BYTES,
      rateLimitRpm: input.rate_limit_rpm ?? MCP_DEFAULT_RATE_LIMIT_RPM,
      ...syncSucceeded(prepared.listing.protocolEra, call.now),
      createdAt: call.now,
      updatedAt: call.now,
    }).returning();
    const outcome = await applyToolListing(call.db, row!, prepared.listing.tools, call.now);
    return {
      row: row!,
      auditDetail: { slug: input.slug, url: prepared.url, auth_type: prepared.credential.authType, header_names: row!.headerNames, protocol_era: prepared.listing.protocolEra, tools_discovered: outcome.added.length },
    };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    const url = input.url !== undefined ? checkedUrl(input.url, call) : undefined;
    const environments = input.environments !== undefined ? await resolveEnvironments(call.db, row.orgId, { environments: input.environments }) : undefined;
    const labels = {
      readsPrivateData: input.reads_private_data ?? row.readsPrivateData,
      readsUntrustedContent: input.reads_untrusted_content ?? row.readsUntrustedContent,
      canSendDataOut: input.can_send_data_out ?? row.canSendDataOut,
    };
    if (input.confirm_trifecta !== true && (await lineagesCompletedByLabels(call.db, row.orgId, row.id, labels)).length > 0) {
      throw new GatewayError('mcp_trifecta_unconfirmed', `With these labels a key granted on this server would reach servers labelled ${RISK_LABELS.join(', ')}. Send \`confirm_trifecta: true\` to change them anyway.`);
    }
    const moved = url !== undefined && url !== row.url;
    if (moved) {
      // Tools approved on the old address are not approved on a new one: until a sync there
      // finds the same definitions, agents get `tool_definition_changed`.
      await call.db.update(mcpServerTools).set({ state: 'changed' }).where(and(eq(mcpServerTools.serverId, row.id), eq(mcpServerTools.state, 'approved')));
    }
    return {
      ...(input.name !== undefined && { name: input.name }),
      // A new address is listed afresh by the next sync; which transport it speaks is not known
      // yet. The credential was given for the old host and is never sent to the new one: it is
      // cleared, to be given again with POST /mcp_servers/{id}/credential.
      ...(moved && {
        url, protocolEra: null, health: 'unknown', consecutiveFailures: 0,
        ...sealServerCredential(call.services.sealer, row, { authType: 'none', headers: {} }), credentialUpdatedAt: call.now,
      }),
      ...(input.project_ids !== undefined && { projectIds: await checkProjects(call.db, row.orgId, input.project_ids) }),
      ...(environments !== undefined && { environments }),
      ...(input.reads_private_data !== undefined && { readsPrivateData: input.reads_private_data }),
      ...(input.reads_untrusted_content !== undefined && { readsUntrustedContent: input.reads_untrusted_content }),
      ...(input.can_send_data_out !== undefined && { canSendDataOut: input.can_send_data_out }),
      ...(input.timeout_ms !== undefined && { timeoutMs: input.timeout_ms }),
      ...(input.max_result_bytes !== undefined && { maxResultBytes: input.max_result_bytes }),
      ...(input.rate_limit_rpm !== undefined && { rateLimitRpm: input.rate_limit_rpm }),
      ...(input.status !== undefined && { status: input.status }),
    };
  },

  /** Deleting a server deletes its tools and every key's grant on it. */
  remove: async () => 'delete',

  uniqueConflict: (constraint) =>
    constraint === 'mcp_servers_org_slug' ? new GatewayError('mcp_server_slug_taken', 'Another tool-gateway server of the organization already has that slug.') : undefined,

  ...mcpGate((write) => {
    switch (write.kind) {
      case 'create': return 'business';
      case 'remove': return 'team';
      case 'patch': {
        const input = write.input as z.infer<typeof patchSchema>;
        const fields = Object.keys(input).filter((f) => f !== 'confirm_trifecta');
        // Pointing a server at another host is enabling it anew, as registering is.
        if (input.status === 'active' || input.url !== undefined) return 'business';
        // Disabling alone is never gated.
        if (input.status === 'disabled' && fields.length === 1) return null;
        return 'team';
      }
      case 'action':
        if (write.action === 'credential') return 'business';
        if (write.action === 'disable_all') return null;
        return 'team';
    }
  }),

  actions: {
    sync: {
      summary: 'List the server\'s tools now (new tools are `pending`; an approved tool whose definition changed is `changed`).',
      schema: z.strictObject({}),
      ifMatch: 'optional',
      async prepare(call, row) {
        return discover(call, { url: row.url, headers: openServerCredential(call.services.sealer, row), timeoutMs: row.timeoutMs, protocolEra: row.protocolEra });
      },
      async run(call, row, _input, listing: Awaited<ReturnType<typeof discover>>) {
        const outcome = await applyToolListing(call.db, row, listing.tools, call.now);
        await resolveServerFailing(call.db, row, call.now);
        return {
          changes: syncSucceeded(listing.protocolEra, call.now),
          auditDetail: { protocol_era: listing.protocolEra, added: outcome.added.length, changed: outcome.changed.length, removed: outcome.removed.length },
        };
      },
    },
    credential: {
      summary: 'Replace the server\'s credential; the answer shows header names only.',
      schema: credentialActionSchema,
      ifMatch: 'optional',
      async run(call, row, input: z.infer<typeof credentialActionSchema>) {
        const credential = checkedCredential(input.credential);
        const sealed = sealServerCredential(call.services.sealer, row, credential);
        return {
          changes: { ...sealed, credentialUpdatedAt: call.now },
          auditDetail: { auth_type: sealed.authType, header_names: sealed.headerNames },
        };
      },
    },
  },

  collectionActions: {
    disable_all: {
      summary: 'Disable every tool-gateway server of the organization in one audited action.',
      schema: z.strictObject({}),
      answerSchema: z.object({ object: z.literal('mcp_server_disable_all'), disabled: z.number().int(), server_ids: z.array(z.string()) }),
      async run(call) {
        const rows = await call.db.update(mcpServers)
          .set({ status: 'disabled', version: sql`${mcpServers.version} + 1`, updatedAt: call.now })
          .where(and(eq(mcpServers.orgId, call.principal.orgId), eq(mcpServers.status, 'active')))
          .returning({ id: mcpServers.id });
        const ids = rows.map((r) => r.id).sort();
        return { body: { object: 'mcp_server_disable_all', disabled: ids.length, server_ids: ids }, auditDetail: { disabled: ids.length, server_ids: ids }, changedIds: ids };
      },
    },
  },

  present: (row) => ({
    slug: row.slug,
    name: row.name,
    url: row.url,
    auth_type: row.authType,
    header_names: row.headerNames,
    project_ids: row.projectIds,
    environments: row.environments,
    reads_private_data: row.readsPrivateData,
    reads_untrusted_content: row.readsUntrustedContent,
    can_send_data_out: row.canSendDataOut,
    timeout_ms: row.timeoutMs,
    max_result_bytes: row.maxResultBytes,
    rate_limit_rpm: row.rateLimitRpm,
    status: row.status,
    protocol_era: row.protocolEra,
    health: row.health,
    last_synced_at: row.lastSyncedAt ? unix(row.lastSyncedAt) : null,
    last_sync_error: row.lastSyncError,
    credential_updated_at: unix(row.credentialUpdatedAt),
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
