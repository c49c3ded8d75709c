import { and, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import { canonicalCidr } from '../../../core/auth/ip-allowlist';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import { roleAtLeast } from '../../../core/auth/scopes';
import type { Executor } from '../../../core/db/client';
import { CREDIT_PERIODS, type CreditLimit, environments, gatewayKeys, OBSERVABILITY_ACCESS, projects, RATE_LIMIT_TIERS } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { isProviderKind } from '../../../core/providers/kinds';
import { issueGatewayKey } from '../../../core/tenancy/gateway-keys';
import { withErrorCode } from '../../validation';
import { unixTime } from './fields';
import { inProjects, newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

type KeyRow = typeof gatewayKeys.$inferSelect;

const creditLimit = z.strictObject({
  amount: z.number().min(0.01).max(1_000_000_000),
  period: z.enum(CREDIT_PERIODS),
});
const rateLimitRpm = z
  .number()
  .int()
  .refine((n) => (RATE_LIMIT_TIERS as readonly number[]).includes(n), `must be one of ${RATE_LIMIT_TIERS.join(', ')}`);
const ipRange = z.string().transform((value, ctx) => {
  try {
    return canonicalCidr(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: `\`${value}\` is not an IP address or CIDR range` });
    return z.NEVER;
  }
});

/** Fields settable on create and patch alike (spec 2.6, gateway keys). */
const settable = {
  label: z.string().trim().min(1).max(80),
  credit_limit: creditLimit.nullable(),
  rate_limit_rpm: rateLimitRpm,
  model_allowlist: z.array(z.string().min(1)).max(500),
  allowed_routes: z.array(z.string().min(1).max(64)).max(500),
  allowed_providers: z.array(withErrorCode(z.string().min(1), 'unknown_provider')).max(50),
  environment: z.string().min(1).max(64).nullable(),
  expires_at: z.iso.datetime({ offset: true }).nullable(),
  observability_access: z.enum(OBSERVABILITY_ACCESS),
  payload_access: z.boolean(),
  allowed_ips: z.array(ipRange).max(32),
};

const createSchema = z.strictObject({
  ...settable,
  project_id: z.string().min(1),
  credit_limit: settable.credit_limit.optional(),
  rate_limit_rpm: settable.rate_limit_rpm.optional(),
  model_allowlist: settable.model_allowlist.optional(),
  allowed_routes: settable.allowed_routes.optional(),
  allowed_providers: settable.allowed_providers.optional(),
  environment: settable.environment.optional(),
  expires_at: settable.expires_at.optional(),
  observability_access: settable.observability_access.optional(),
  payload_access: settable.payload_access.optional(),
  allowed_ips: settable.allowed_ips.optional(),
});
const patchSchema = z.strictObject({ ...settable, disabled: z.boolean() }).partial();

export const DEFAULT_ROTATION_OVERLAP_SECONDS = 86_400;
export const MAX_ROTATION_OVERLAP_SECONDS = 604_800;

const readSchema = z.object({
  label: z.string(),
  project_id: z.string(),
  key_prefix: z.string().describe('The first characters of the secret, to recognise it.'),
  credit_limit: creditLimit.nullable(),
  rate_limit_rpm: z.number().int(),
  model_allowlist: z.array(z.string()),
  allowed_routes: z.array(z.string()),
  allowed_providers: z.array(z.string()),
  environment: z.string().nullable(),
  expires_at: z.string().nullable(),
  observability_access: z.enum(OBSERVABILITY_ACCESS),
  payload_access: z.boolean(),
  disabled: z.boolean(),
  allowed_ips: z.array(z.string()),
  rotated_from_key_id: z.string().nullable(),
  revoked_at: z.string().nullable(),
  created_at: unixTime,
  updated_at: unixTime,
});

type Settable = Partial<z.infer<z.ZodObject<typeof settable>>>;

async function checkReferences(db: Executor, orgId: string, input: Settable): Promise<void> {
  const unknown = input.allowed_providers?.find((p) => !isProviderKind(p));
  if (unknown) throw new GatewayError('unknown_provider', `Unknown provider \`${unknown}\` in \`allowed_providers\`.`);
  if (input.environment) {
    const [env] = await db.select({ id: environments.id }).from(environments)
      .where(and(eq(environments.orgId, orgId), eq(environments.slug, input.environment)));
    if (!env) throw new GatewayError('invalid_request', `Invalid \`environment\`: the organization has no environment \`${input.environment}\`.`);
  }
}

type Reach = { observabilityAccess: KeyRow['observabilityAccess']; payloadAccess: boolean };

/**
 * A project-restricted token gives a key at most its own reach (issue 20): `organization`
 * observability reads every project's requests, usage and jobs, so such a token sets `none` or
 * `scoped` only; stored prompts and answers (`payload_access`) only when the token's creator is
 * an owner or admin. `current` is what the key already has (a patch): keeping it is no widening,
 * so a client re-sending a key's whole configuration is not refused for fields it did not change.
 */
function refuseWiderReach(principal: ManagementPrincipal, wanted: Partial<Reach>, current?: Reach): void {
  if (!principal.projectIds) return;
  if (wanted.observabilityAccess === 'organization' && current?.observabilityAccess !== 'organization') {
    throw new GatewayError('project_restricted', 'This token is restricted to projects: it cannot give a key `observability_access: organization` (at most `scoped`).');
  }
  if (wanted.payloadAccess === true && current?.payloadAccess !== true && !roleAtLeast(principal.role, 'admin')) {
    throw new GatewayError('project_restricted', 'This token is restricted to projects and its creator is not an owner or admin: it cannot give a key `payload_access`.');
  }
}

function columns(input: Settable): Partial<typeof gatewayKeys.$inferInsert> {
  return {
    ...(input.label !== undefined && { label: input.label }),
    ...(input.credit_limit !== undefined && { creditLimit: input.credit_limit }),
    ...(input.rate_limit_rpm !== undefined && { rateLimitRpm: input.rate_limit_rpm }),
    ...(input.model_allowlist !== undefined && { modelAllowlist: input.model_allowlist }),
    ...(input.allowed_routes !== undefined && { allowedRoutes: input.allowed_routes }),
    ...(input.allowed_providers !== undefined && { allowedProviders: input.allowed_providers }),
    ...(input.environment !== undefined && { environment: input.environment }),
    ...(input.expires_at !== undefined && { expiresAt: input.expires_at === null ? null : new Date(input.expires_at) }),
    ...(input.observability_access !== undefined && { observabilityAccess: input.observability_access }),
    ...(input.payload_access !== undefined && { payloadAccess: input.payload_access }),
    ...(input.allowed_ips !== undefined && { allowedIps: input.allowed_ips }),
  };
}

async function findKey(db: Executor, orgId: string, id: string, forUpdate: boolean, includeRevoked = false): Promise<KeyRow | null> {
  // A revoked key no longer appears in lists or reads (spec 2.6).
  const query = db.select().from(gatewayKeys)
    .where(and(eq(gatewayKeys.orgId, orgId), eq(gatewayKeys.id, id), includeRevoked ? undefined : isNull(gatewayKeys.revokedAt)));
  return selectOne(query, forUpdate);
}

const rotateSchema = z.strictObject({
  overlap_seconds: z.number().int().min(0).max(MAX_ROTATION_OVERLAP_SECONDS).optional(),
});

/** Spec 4.4: a revoked, expired, already rotated key or one in an archived project is 409. */
async function refuseUnrotatable(db: ResourceCall['db'], old: KeyRow, now: Date): Promise<void> {
  const notRotatable = (why: string) => new GatewayError('key_not_rotatable', `This key cannot be rotated: ${why}.`);
  if (old.revokedAt) throw notRotatable('it is revoked');
  if (old.expiresAt && old.expiresAt <= now) throw notRotatable('it has expired');
  const [successor] = await db.select({ id: gatewayKeys.id }).from(gatewayKeys).where(eq(gatewayKeys.rotatedFromKeyId, old.id));
  if (successor) throw notRotatable(`it was already rotated to \`${successor.id}\``);
  const [project] = await db.select({ archivedAt: projects.archivedAt }).from(projects).where(eq(projects.id, old.projectId));
  if (project?.archivedAt) throw notRotatable('its project is archived');
}

/** When the old key stops working: the overlap's end, or its own expiry if sooner; null for overlap 0. */
type RotationPlan = { overlapSeconds: number; end: Date | null };

/**
 * Before the row is locked: the rotation is allowed, and the durable `keyRotation` workflow
 * is started for the overlap's end. If the rotation's transaction then fails, the workflow
 * finds no successor and revokes nothing.
 */
async function planRotation(call: ResourceCall, old: KeyRow, input: z.infer<typeof rotateSchema>): Promise<RotationPlan> {
  // Rotating answers a new secret with the old key's reach: a restricted token may only be
  // handed one it could have given itself.
  refuseWiderReach(call.principal, old);
  await refuseUnrotatable(call.db, old, call.now);
  const overlapSeconds = input.overlap_seconds ?? DEFAULT_ROTATION_OVERLAP_SECONDS;
  if (overlapSeconds === 0) return { overlapSeconds, end: null };
  const overlapEnd = new Date(call.now.getTime() + call.services.scaleMs(overlapSeconds * 1000));
  const end = old.expiresAt && old.expiresAt < overlapEnd ? old.expiresAt : overlapEnd;
  await call.services.scheduleKeyRevocation({ orgId: old.orgId, oldKeyId: old.id, revokeAt: end.toISOString() });
  return { overlapSeconds, end };
}

/**
 * Spec 4.4: a new key with the old one's configuration and lineage (so spend limits and grants
 * carry over); the old key keeps working for the overlap, then the durable `keyRotation`
 * workflow revokes it. Its `expires_at` is also moved to the overlap's end, so the gateway
 * refuses it on time even before the workflow runs.
 */
async function rotateKey(call: ResourceCall, old: KeyRow, plan: RotationPlan) {
  refuseWiderReach(call.principal, old);
  await refuseUnrotatable(call.db, old, call.now);

  // Everything but identity, secret and history carries over, `disabled` included: rotating
  // must not quietly re-enable a key someone switched off.
  const { id: _id, secretHash: _h, secretPrefix: _p, revokedAt: _r, version: _v, createdAt: _c, updatedAt: _u, ...config } = old;
  const issued = await issueGatewayKey(call.db, { ...config, rotatedFromKeyId: old.id, createdByMemberId: call.principal.memberId });
  const answer = (await findKey(call.db, old.orgId, issued.id, false))!;

  const changes: Partial<KeyRow> = plan.end ? { expiresAt: plan.end } : { revokedAt: call.now };
  return {
    changes,
    answer,
    reveal: {
      secret: issued.secret,
      previous_key: { id: old.id, expires_at: changes.expiresAt?.toISOString() ?? null, revoked_at: changes.revokedAt?.toISOString() ?? null },
    },
    auditDetail: { new_key_id: issued.id, overlap_seconds: plan.overlapSeconds },
  };
}

export const gatewayKeysResource: ResourceType<KeyRow> = {
  type: 'gateway_keys',
  object: 'gateway_key',
  scope: 'keys',
  table: gatewayKeys,
  readSchema,
  createSchema,
  revealSchema: z.object({ secret: z.string().describe('The key secret, shown only in this answer.') }),
  patchSchema,

  find: (db, orgId, id, { forUpdate, includeHidden }) => findKey(db, orgId, id, forUpdate, includeHidden),

  list(db, principal, page) {
    return newestFirst(db, gatewayKeys, and(eq(gatewayKeys.orgId, principal.orgId), isNull(gatewayKeys.revokedAt), inProjects(principal.projectIds, gatewayKeys.projectId)), page);
  },

  async create(call: ResourceCall, input: z.infer<typeof createSchema>) {
    const orgId = call.principal.orgId;
    const allowed = call.principal.projectIds;
    if (allowed && !allowed.includes(input.project_id)) {
      throw new GatewayError('project_restricted', 'This token is restricted to other projects.');
    }
    const [project] = await call.db.select({ archivedAt: projects.archivedAt }).from(projects)
      .where(and(eq(projects.orgId, orgId), eq(projects.id, input.project_id)));
    if (!project) throw new GatewayError('invalid_request', `Invalid \`project_id\`: no project \`${input.project_id}\`.`);
    if (project.archivedAt) throw new GatewayError('project_archived', 'Keys cannot be created in an archived project.');
    refuseWiderReach(call.principal, { observabilityAccess: input.observability_access, payloadAccess: input.payload_access });
    await checkReferences(call.db, orgId, input);
    const issued = await issueGatewayKey(call.db, {
      ...columns(input),
      orgId,
      projectId: input.project_id,
      label: input.label,
      createdByMemberId: call.principal.memberId,
    });
    const row = (await findKey(call.db, orgId, issued.id, false))!;
    return { row, reveal: { secret: issued.secret } };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    refuseWiderReach(call.principal, { observabilityAccess: input.observability_access, payloadAccess: input.payload_access }, row);
    await checkReferences(call.db, call.principal.orgId, input);
    // A new period starts a new window id (core/spend/scopes.ts windowId): counted from the ledger.
    const periodOf = (limit: CreditLimit | null | undefined) => limit?.period ?? 'never';
    const periodChanged = input.credit_limit !== undefined && periodOf(input.credit_limit) !== periodOf(row.creditLimit);
    return { ...columns(input), ...(input.disabled !== undefined && { disabled: input.disabled }), ...(periodChanged && { creditPeriodSince: call.now }) };
  },

  /** DELETE revokes: the key stops working at once and vanishes from lists and reads. */
  async remove(call) {
    return { revokedAt: call.now };
  },

  actions: {
    rotate: {
      summary: 'Rotate a key: a new key with the same configuration; the old one ends after `overlap_seconds`.',
      schema: rotateSchema,
      ifMatch: 'optional',
      revealSchema: z.object({
        secret: z.string(),
        previous_key: z.object({ id: z.string(), expires_at: z.string().nullable(), revoked_at: z.string().nullable() }),
      }),
      prepare: planRotation,
      run: (call, old, _input, plan: RotationPlan) => rotateKey(call, old, plan),
    },
  },

  projectOf: (row) => row.projectId,

  present: (row) => ({
    label: row.label,
    project_id: row.projectId,
    key_prefix: row.secretPrefix,
    credit_limit: row.creditLimit,
    rate_limit_rpm: row.rateLimitRpm,
    model_allowlist: row.modelAllowlist,
    allowed_routes: row.allowedRoutes,
    allowed_providers: row.allowedProviders,
    environment: row.environment,
    expires_at: row.expiresAt?.toISOString() ?? null,
    observability_access: row.observabilityAccess,
    payload_access: row.payloadAccess,
    disabled: row.disabled,
    allowed_ips: row.allowedIps,
    rotated_from_key_id: row.rotatedFromKeyId,
    revoked_at: row.revokedAt?.toISOString() ?? null,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
