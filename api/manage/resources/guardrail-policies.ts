import { and, eq, isNotNull, isNull, sql, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import { z } from 'zod';
import type { Executor } from '../../../core/db/client';
import { gatewayKeys, orgSettings, projects, type GuardrailPolicy } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { guardrailPolicyFields } from '../../../core/guardrails/rules';
import { afterCursor, keysetOrder, timestampKey, type Keyset } from '../../../core/paging';
import { unixTime } from './fields';
import { inProjects, selectOne, type Listed, type ResourceType, type VersionedRow, type VersionedTable } from './resource-type';
import { unix } from './router';

type Target = { kind: 'organization' } | { kind: 'project'; id: string } | { kind: 'key'; id: string };

/** A policy as the framework sees it: its parent's id, version and timestamps, its own fields. */
type PolicyRow = VersionedRow & {
  target: Target;
  /** The parent's row id (the organization's id for its settings). */
  parentId: string;
  projectId: string | null;
  policy: GuardrailPolicy | null;
  updatedAt: Date;
};

const TARGET = /^(?:organization|project:[A-Za-z0-9_-]{1,64}|key:[A-Za-z0-9_-]{1,64})$/;
const targetField = z.string().regex(TARGET, 'one of `organization`, `project:<project_id>`, `key:<key_id>`');

function parseTarget(id: string): Target | null {
  if (!TARGET.test(id)) return null;
  if (id === 'organization') return { kind: 'organization' };
  const [kind, rest] = [id.slice(0, id.indexOf(':')), id.slice(id.indexOf(':') + 1)];
  return kind === 'project' ? { kind: 'project', id: rest } : { kind: 'key', id: rest };
}

const idOf = (target: Target) => (target.kind === 'organization' ? 'organization' : `${target.kind}:${target.id}`);

const createSchema = z.strictObject({
  target: targetField,
  enabled: guardrailPolicyFields.enabled.default(true),
  on_engine_error: guardrailPolicyFields.on_engine_error.default('block'),
  rules: guardrailPolicyFields.rules,
});
/** A patch is merged over the current policy (spec 2.6); `rules`, when given, replaces the list. */
const patchSchema = z.strictObject({
  enabled: guardrailPolicyFields.enabled,
  on_engine_error: guardrailPolicyFields.on_engine_error,
  rules: guardrailPolicyFields.rules,
}).partial();

const ruleRead = z.looseObject({ detector: z.string(), stage: z.string(), action: z.string() });

/**
 * The parent row a target names, with its policy (null when it has none): the organization's
 * settings (made on first use, as org_settings does), a project, or a key that is not revoked.
 */
async function parentOf(db: Executor, orgId: string, target: Target, forUpdate: boolean): Promise<PolicyRow | null> {
  if (target.kind === 'organization') {
    await db.insert(orgSettings).values({ id: orgId, orgId }).onConflictDoNothing();
    const row = await selectOne(db.select().from(orgSettings).where(eq(orgSettings.id, orgId)), forUpdate);
    return row && { id: 'organization', orgId, version: row.version, managedBy: row.managedBy, target, parentId: orgId, projectId: null, policy: row.guardrailPolicy, updatedAt: row.updatedAt };
  }
  if (target.kind === 'project') {
    const row = await selectOne(db.select().from(projects).where(and(eq(projects.orgId, orgId), eq(projects.id, target.id))), forUpdate);
    return row && { id: idOf(target), orgId, version: row.version, managedBy: row.managedBy, target, parentId: row.id, projectId: row.id, policy: row.guardrailPolicy, updatedAt: row.updatedAt };
  }
  const row = await selectOne(
    db.select().from(gatewayKeys).where(and(eq(gatewayKeys.orgId, orgId), eq(gatewayKeys.id, target.id), isNull(gatewayKeys.revokedAt))),
    forUpdate,
  );
  return row && { id: idOf(target), orgId, version: row.version, managedBy: row.managedBy, target, parentId: row.id, projectId: row.projectId, policy: row.guardrailPolicy, updatedAt: row.updatedAt };
}

function tableOf(target: Target): VersionedTable {
  return target.kind === 'organization' ? orgSettings : target.kind === 'project' ? projects : gatewayKeys;
}

/**
 * `guardrail_policies` (spec 2.6): one policy per organization, project or key, stored on that
 * parent's row, so its version is the parent's and writing it moves the parent's version.
 * Guardrails are a security control: writes need an admin (a member could switch one off).
 */
export const guardrailPoliciesResource: ResourceType<PolicyRow> = {
  type: 'guardrail_policies',
  object: 'guardrail_policy',
  scope: 'guardrails',
  writeRole: 'admin',
  readSchema: z.object({
    target: z.string().describe('`organization`, `project:<project_id>` or `key:<key_id>`; also the id.'),
    enabled: z.boolean(),
    on_engine_error: z.enum(['block', 'allow']),
    rules: z.array(ruleRead),
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  storedIn: (row) => ({ table: tableOf(row.target), id: row.parentId }),

  async find(db, orgId, id, { forUpdate }) {
    const target = parseTarget(id);
    if (!target) return null;
    const row = await parentOf(db, orgId, target, forUpdate);
    return row?.policy ? row : null;
  },

  /**
   * Natural order, by precedence: the organization's policy, then projects', then keys', each
   * in the order its parent was made. The sort key is the level (0, 1, 2) then the parent's
   * `created_at`; the policy id (`project:<id>`) breaks ties. Each level is read a page at most.
   */
  async list(db, principal, page) {
    const orgId = principal.orgId;
    const allowed = principal.projectIds;
    const keysetOf = (level: string, createdAt: PgColumn, prefix: string, id: PgColumn): Keyset => ({
      key: sql<string>`${level} || ${timestampKey(createdAt)}`, id: sql<string>`${prefix} || ${id}`, order: 'asc', type: 'text',
    });
    const projectOrder = keysetOf('1', projects.createdAt, 'project:', projects.id);
    const keyOrder = keysetOf('2', gatewayKeys.createdAt, 'key:', gatewayKeys.id);
    const [settings, projectRows, keyRows] = await Promise.all([
      page.after ? [] : db.select().from(orgSettings).where(and(eq(orgSettings.id, orgId), isNotNull(orgSettings.guardrailPolicy))),
      db.select({ row: projects, at: projectOrder.key as SQL<string> }).from(projects)
        .where(and(eq(projects.orgId, orgId), isNotNull(projects.guardrailPolicy), inProjects(allowed, projects.id), afterCursor(projectOrder, page.after)))
        .orderBy(...keysetOrder(projectOrder)).limit(page.limit + 1),
      db.select({ row: gatewayKeys, at: keyOrder.key as SQL<string> }).from(gatewayKeys)
        .where(and(eq(gatewayKeys.orgId, orgId), isNull(gatewayKeys.revokedAt), isNotNull(gatewayKeys.guardrailPolicy), inProjects(allowed, gatewayKeys.projectId), afterCursor(keyOrder, page.after)))
        .orderBy(...keysetOrder(keyOrder)).limit(page.limit + 1),
    ]);
    const listed: Listed<PolicyRow>[] = [];
    for (const s of settings) listed.push({ row: { id: 'organization', orgId, version: s.version, managedBy: s.managedBy, target: { kind: 'organization' }, parentId: orgId, projectId: null, policy: s.guardrailPolicy, updatedAt: s.updatedAt }, cursor: { at: '0', id: 'organization' } });
    for (const { row: p, at } of projectRows) listed.push({ row: { id: `project:${p.id}`, orgId, version: p.version, managedBy: p.managedBy, target: { kind: 'project', id: p.id }, parentId: p.id, projectId: p.id, policy: p.guardrailPolicy, updatedAt: p.updatedAt }, cursor: { at, id: `project:${p.id}` } });
    for (const { row: k, at } of keyRows) listed.push({ row: { id: `key:${k.id}`, orgId, version: k.version, managedBy: k.managedBy, target: { kind: 'key', id: k.id }, parentId: k.id, projectId: k.projectId, policy: k.guardrailPolicy, updatedAt: k.updatedAt }, cursor: { at, id: `key:${k.id}` } });
    return listed.slice(0, page.limit + 1);
  },

  /** Writes the policy onto its parent as the parent's next version; one policy per parent. */
  async create(call, input: z.infer<typeof createSchema>) {
    const target = parseTarget(input.target)!;
    const orgId = call.principal.orgId;
    const parent = await parentOf(call.db, orgId, target, true);
    const allowed = call.principal.projectIds;
    // A restricted token sees no parent outside its projects, and cannot write the organization's.
    if (allowed && (target.kind === 'organization' || !parent || !allowed.includes(parent.projectId!))) {
      if (target.kind === 'organization') throw new GatewayError('project_restricted', 'This token is restricted to projects; the organization\'s policy needs an unrestricted token to change.');
      throw new GatewayError('project_restricted', 'This token is restricted to other projects.');
    }
    if (!parent) throw new GatewayError('invalid_request', `Invalid \`target\`: no ${target.kind === 'key' ? 'active key' : 'project'} \`${(target as { id: string }).id}\`.`);
    if (parent.policy) throw new GatewayError('invalid_request', `Invalid \`target\`: \`${input.target}\` already has a guardrail policy; change it with PATCH.`);
    const policy: GuardrailPolicy = { enabled: input.enabled, on_engine_error: input.on_engine_error, rules: input.rules };
    const table = tableOf(target);
    const [written] = (await call.db
      .update(table)
      .set({ guardrailPolicy: policy, version: parent.version + 1, updatedAt: call.now } as never)
      .where(and(eq(table.id, parent.parentId), eq(table.version, parent.version)))
      .returning({ version: table.version })) as Array<{ version: number }>;
    if (!written) throw new GatewayError('version_conflict', 'The policy\'s parent changed while it was written; retry.');
    return { row: { ...parent, policy, version: written.version, updatedAt: call.now } };
  },

  async patch(_call, row, input: z.infer<typeof patchSchema>) {
    const current = row.policy!;
    const merged: GuardrailPolicy = {
      enabled: input.enabled ?? current.enabled,
      on_engine_error: input.on_engine_error ?? current.on_engine_error,
      rules: input.rules ?? current.rules,
    };
    return { guardrailPolicy: merged };
  },

  /** Removes the policy; the parent stays, with its version moved. */
  async remove() {
    return { hide: { guardrailPolicy: null } };
  },

  projectOf: (row) => row.projectId,

  present: (row) => ({
    target: row.id,
    enabled: row.policy!.enabled,
    on_engine_error: row.policy!.on_engine_error,
    rules: row.policy!.rules,
    updated_at: unix(row.updatedAt),
  }),
};
