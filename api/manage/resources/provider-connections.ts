import { and, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import type { Sealer } from '../../../core/crypto/sealing';
import { CONNECTION_STATUSES, POOL_ROLES, providerConnections } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { checkServiceUrl, hostOnDomain, isPrivateHost } from '../../../core/net/service-url';
import { isProviderKind, kindSpec, type ProviderKind } from '../../../core/providers/kinds';
import { providerHostVerdict } from '../../../core/providers/provider-hosts';
import { connectionBaseUrl } from '../../../core/providers/open-connection';
import { withErrorCode } from '../../validation';
import { environmentFields, environmentsRead, nameField, presentEnvironments, resolveEnvironments, timeoutMsField, unixTime } from './fields';
import { newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

type ConnectionRow = typeof providerConnections.$inferSelect;

const MAX_ALTERNATE_BASE_URLS = 5;
const MAX_FALLBACK_SECRETS = 10;

const secretField = z.string().min(1).max(8192);
/** Kind-specific settings; `base_url` is the one every kind takes. Values are plain JSON. */
const configField = z.looseObject({
  base_url: z.string().max(2048).optional(),
  /** Anthropic: the `anthropic-beta` features a client's Messages request may turn on through this connection. */
  anthropic_betas: z.array(z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'a beta name, such as `prompt-caching-2024-07-31`')).max(20).optional(),
});
const modelMapField = z.record(z.string().min(1).max(200), z.string().min(1).max(200))
  .refine((m) => Object.keys(m).length <= 500, 'at most 500 entries');

const settable = {
  name: nameField,
  ...environmentFields,
  config: configField,
  model_map: modelMapField,
  timeout_ms: timeoutMsField,
  alternate_base_urls: z.array(z.string().max(2048)).max(MAX_ALTERNATE_BASE_URLS),
  pool_role: z.enum(POOL_ROLES),
};

const createSchema = z.strictObject({
  kind: withErrorCode(z.string().min(1).max(64), 'unknown_provider'),
  name: settable.name,
  secret: secretField,
  fallback_secrets: z.array(secretField).max(MAX_FALLBACK_SECRETS).optional(),
  environments: settable.environments.optional(),
  environment: settable.environment.optional(),
  config: settable.config.optional(),
  model_map: settable.model_map.optional(),
  timeout_ms: settable.timeout_ms.optional(),
  alternate_base_urls: settable.alternate_base_urls.optional(),
  pool_role: settable.pool_role.optional(),
  validate: z.boolean().optional(),
});
const patchSchema = z.strictObject({ ...settable, status: z.enum(CONNECTION_STATUSES) }).partial();
const credentialSchema = z.strictObject({
  secret: secretField,
  fallback_secrets: z.array(secretField).max(MAX_FALLBACK_SECRETS).optional(),
  validate: z.boolean().optional(),
});

const readSchema = z.object({
  kind: z.string(),
  name: z.string(),
  ...environmentsRead,
  config: z.record(z.string(), z.unknown()),
  model_map: z.record(z.string(), z.string()),
  timeout_ms: z.number().int().nullable(),
  alternate_base_urls: z.array(z.string()),
  pool_role: z.enum(POOL_ROLES),
  status: z.enum(CONNECTION_STATUSES),
  base_url: z.string().describe('Where requests go: `config.base_url` or the kind\'s own.'),
  fallback_secret_count: z.number().int().describe('How many pooled fallback credentials are sealed on the connection.'),
  has_credential: z.boolean().describe('False after the connection moved to a host its credential was not given for: it serves nothing until `POST /provider_connections/{id}/credential`.'),
  credential_updated_at: unixTime,
  created_at: unixTime,
  updated_at: unixTime,
});

/** Names clash ignoring case and repeated spaces (spec 2.6). */
export function connectionNameKey(name: string): string {
  return name.trim().replace(/\s+/g, ' ').toLowerCase();
}

function kindOf(kind: string): ProviderKind {
  if (!isProviderKind(kind)) throw new GatewayError('unknown_provider', `Unknown provider kind \`${kind}\`; see GET /manage/v1/provider_kinds.`);
  return kind;
}

/**
 * A kind with a fixed provider host sends its credential only to hosts the provider owns: its own
 * default host, or one on the domains listed for the kind (the alternate-host rule, spec 2.6, and
 * its codes), so a member cannot point the organization's key at a host of their own (issue 20).
 * A deployment that allows private networks (development, tests) may also name a private host:
 * the local stand-in for the provider.
 */
function checkProviderHost(kind: ProviderKind, url: URL, services: ResourceCall['services']): void {
  const verdict = providerHostVerdict(kind, url.hostname);
  if (verdict === 'ok' || (services.allowPrivateNetwork && isPrivateHost(url.hostname))) return;
  const { defaultBaseUrl: own, alternateHosts, name } = kindSpec(kind);
  if (verdict === 'alternate_host_not_allowed') {
    throw new GatewayError('alternate_host_not_allowed', `Invalid \`config.base_url\`: kind \`${kind}\` is reached only at ${own ? new URL(own).hostname : 'its own host'}.`);
  }
  throw new GatewayError('alternate_host_off_domain', `Invalid \`config.base_url\`: \`${url.hostname}\` is not on a domain ${name} owns (${(alternateHosts as readonly string[]).join(', ')}).`);
}

/**
 * The base URL requests go to; `config.base_url` must be https to a public host (spec 2.6), and
 * for a kind with a fixed provider host, one the provider owns (`checkProviderHost`).
 */
function baseUrlFor(kind: ProviderKind, config: Record<string, unknown>, services: ResourceCall['services']): string {
  const given = config.base_url;
  if (typeof given === 'string') {
    const verdict = checkServiceUrl(given, { allowPrivateNetwork: services.allowPrivateNetwork });
    if (!verdict.ok) throw new GatewayError('invalid_request', `Invalid \`config.base_url\`: it ${verdict.reason}.`);
    checkProviderHost(kind, verdict.url, services);
    return given.replace(/\/+$/, '');
  }
  const fallback = kindSpec(kind).defaultBaseUrl;
  if (!fallback) throw new GatewayError('invalid_request', `Invalid \`config.base_url\`: required for kind \`${kind}\`.`);
  return fallback;
}

/** Alternate hosts: on the provider's own listed domains, or any public HTTPS host where the customer types the URL. */
function checkAlternates(kind: ProviderKind, urls: string[], services: ResourceCall['services']): string[] {
  const allowed = kindSpec(kind).alternateHosts;
  return urls.map((raw, i) => {
    if (allowed !== 'any' && allowed.length === 0) {
      throw new GatewayError('alternate_host_not_allowed', `Kind \`${kind}\` takes no alternate hosts.`);
    }
    const verdict = checkServiceUrl(raw, { allowPrivateNetwork: services.allowPrivateNetwork && allowed === 'any' });
    if (!verdict.ok) throw new GatewayError('invalid_request', `Invalid \`alternate_base_urls[${i}]\`: it ${verdict.reason}.`);
    if (allowed !== 'any' && !allowed.some((d) => hostOnDomain(verdict.url.hostname, d))) {
      throw new GatewayError('alternate_host_off_domain', `\`${verdict.url.hostname}\` is not on a domain ${kindSpec(kind).name} owns (${allowed.join(', ')}).`);
    }
    return raw.replace(/\/+$/, '');
  });
}

/** Every host a connection's credential is sent to: its base URL's and its alternates'. */
function credentialHosts(baseUrl: string, alternates: readonly string[]): Set<string> {
  return new Set([baseUrl, ...alternates].map((u) => new URL(u).host.toLowerCase()));
}

/**
 * Whether a patch sends the credential somewhere it was not given for: its new base URL or
 * alternates name a host the connection did not have, whatever its kind. The one exception is
 * a host the provider of a fixed-host kind owns (`us.api.openai.com` for an `openai` key): the
 * provider's own. A private host (allowed where private networks are, for self-hosted models)
 * is never one, so repointing an `openai` connection inside the network drops its credential.
 */
function credentialMoves(kind: ProviderKind, row: ConnectionRow, next: { config?: Record<string, unknown>; alternates?: string[] }): boolean {
  const before = credentialHosts(connectionBaseUrl(kind, row.config), row.alternateBaseUrls);
  const after = credentialHosts(connectionBaseUrl(kind, next.config ?? row.config), next.alternates ?? row.alternateBaseUrls);
  const providerOwns = (host: string) => kindSpec(kind).alternateHosts !== 'any' && providerHostVerdict(kind, new URL(`https://${host}`).hostname) === 'ok';
  return [...after].some((host) => !before.has(host) && !providerOwns(host));
}

/** No credential: what a connection keeps after it moved to a host its credential was not given for. */
const CLEARED_CREDENTIALS = { secretSealed: null, fallbackSecretsSealed: null, fallbackSecretCount: 0 } as const;

function sealCredentials(sealer: Sealer, orgId: string, id: string, secret: string, fallbacks: string[] | undefined) {
  return {
    secretSealed: sealer.seal(secret, { orgId, recordId: id, field: 'secret' }),
    ...(fallbacks !== undefined && {
      fallbackSecretsSealed: fallbacks.length > 0 ? sealer.seal(JSON.stringify(fallbacks), { orgId, recordId: id, field: 'fallback_secrets' }) : null,
      fallbackSecretCount: fallbacks.length,
    }),
  };
}

/** `validate: true`: the provider must accept the credential before anything is stored. */
async function validateCredential(call: Pick<ResourceCall, 'services'>, kind: ProviderKind, baseUrl: string, secret: string): Promise<void> {
  const check = await call.services.checkCredential(kind, baseUrl, secret);
  if (check.outcome === 'rejected') {
    throw new GatewayError('credential_rejected', `${kindSpec(kind).name} rejected the credential (HTTP ${check.status}); nothing was saved.`);
  }
  if (check.outcome === 'unreachable') {
    throw new GatewayError('upstream_error', `Could not check the credential with ${kindSpec(kind).name} (${check.detail}); nothing was saved.`);
  }
}

async function findConnection(db: ResourceCall['db'], orgId: string, id: string, forUpdate: boolean): Promise<ConnectionRow | null> {
  const query = db.select().from(providerConnections)
    .where(and(eq(providerConnections.orgId, orgId), eq(providerConnections.id, id), isNull(providerConnections.deletedAt)));
  return selectOne(query, forUpdate);
}

export const providerConnectionsResource: ResourceType<ConnectionRow> = {
  type: 'provider_connections',
  object: 'provider_connection',
  scope: 'connections',
  table: providerConnections,
  readSchema,
  createSchema,
  patchSchema,

  find: (db, orgId, id, { forUpdate }) => findConnection(db, orgId, id, forUpdate),

  list(db, principal, page) {
    return newestFirst(db, providerConnections, and(eq(providerConnections.orgId, principal.orgId), isNull(providerConnections.deletedAt)), page);
  },

  /** URL rules first, then (with `validate`) the provider's word on the credential: no transaction open yet. */
  async precheckCreate(call, input: z.infer<typeof createSchema>) {
    const kind = kindOf(input.kind);
    const baseUrl = baseUrlFor(kind, input.config ?? {}, call.services);
    checkAlternates(kind, input.alternate_base_urls ?? [], call.services);
    if (input.validate) await validateCredential(call, kind, baseUrl, input.secret);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const orgId = call.principal.orgId;
    const kind = kindOf(input.kind);
    const config = input.config ?? {};
    const alternates = checkAlternates(kind, input.alternate_base_urls ?? [], call.services);
    const environments = (await resolveEnvironments(call.db, orgId, input)) ?? [];
    const id = newId('conn');
    const [row] = await call.db.insert(providerConnections).values({
      id,
      orgId,
      kind,
      name: input.name,
      nameKey: connectionNameKey(input.name),
      ...sealCredentials(call.services.sealer, orgId, id, input.secret, input.fallback_secrets ?? []),
      environments,
      config,
      modelMap: input.model_map ?? {},
      timeoutMs: input.timeout_ms ?? null,
      alternateBaseUrls: alternates,
      poolRole: input.pool_role ?? 'active',
      credentialUpdatedAt: call.now,
    }).returning();
    return { row: row!, auditDetail: { kind, validated: input.validate === true } };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    const kind = kindOf(row.kind);
    if (input.config !== undefined) baseUrlFor(kind, input.config, call.services);
    const alternates = input.alternate_base_urls !== undefined ? checkAlternates(kind, input.alternate_base_urls, call.services) : undefined;
    const environments = await resolveEnvironments(call.db, row.orgId, input);
    // The credential (and its pooled fallbacks) was given for the old hosts and is never sent to a
    // new one, as for a tool-gateway server that moves: it is cleared, to be given again with
    // POST /provider_connections/{id}/credential (which can check it with the new host first).
    const moved = credentialMoves(kind, row, { config: input.config, alternates });
    return {
      ...(input.name !== undefined && { name: input.name, nameKey: connectionNameKey(input.name) }),
      ...(environments !== undefined && { environments }),
      ...(input.config !== undefined && { config: input.config }),
      ...(input.model_map !== undefined && { modelMap: input.model_map }),
      ...(input.timeout_ms !== undefined && { timeoutMs: input.timeout_ms }),
      ...(alternates !== undefined && { alternateBaseUrls: alternates }),
      ...(moved && { ...CLEARED_CREDENTIALS, credentialUpdatedAt: call.now }),
      ...(input.pool_role !== undefined && { poolRole: input.pool_role }),
      ...(input.status !== undefined && { status: input.status }),
    };
  },

  async remove(call) {
    return { hide: { deletedAt: call.now } };
  },

  uniqueConflict: (constraint) =>
    constraint === 'provider_connections_org_kind_name'
      ? new GatewayError('duplicate_connection_name', 'Another connection of this kind already has that name (names ignore case and repeated spaces).')
      : undefined,

  actions: {
    credential: {
      summary: 'Replace the connection\'s credential (and, if given, its pooled fallbacks).',
      schema: credentialSchema,
      ifMatch: 'optional',
      // The provider is asked before the row is locked; a connection changed meanwhile is a 409.
      async prepare(call, row, input: z.infer<typeof credentialSchema>) {
        const kind = kindOf(row.kind);
        if (input.validate) await validateCredential(call, kind, baseUrlFor(kind, row.config, call.services), input.secret);
      },
      async run(call, row, input: z.infer<typeof credentialSchema>) {
        return {
          changes: { ...sealCredentials(call.services.sealer, row.orgId, row.id, input.secret, input.fallback_secrets), credentialUpdatedAt: call.now },
          auditDetail: { validated: input.validate === true, fallback_secrets_replaced: input.fallback_secrets !== undefined },
        };
      },
    },
  },

  present: (row) => ({
    kind: row.kind,
    name: row.name,
    ...presentEnvironments(row.environments),
    config: row.config,
    model_map: row.modelMap,
    timeout_ms: row.timeoutMs,
    alternate_base_urls: row.alternateBaseUrls,
    pool_role: row.poolRole,
    status: row.status,
    base_url: connectionBaseUrl(row.kind as ProviderKind, row.config),
    fallback_secret_count: row.fallbackSecretCount,
    has_credential: row.secretSealed !== null,
    credential_updated_at: unix(row.credentialUpdatedAt),
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
