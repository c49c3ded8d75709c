import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { gatewayKeys, projects, requestLogs } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { nameField, spendLimitSchema, unixTime } from './fields';
import { inProjects, newestFirst, selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

type ProjectRow = typeof projects.$inferSelect;

const name = nameField;
const slug = z.string().min(1).max(60).regex(/^[a-z0-9][a-z0-9_-]*$/, 'lower-case letters, digits, - and _');

const createSchema = z.strictObject({
  name,
  slug: slug.optional(),
  model_allowlist: z.array(z.string().min(1)).max(500).optional(),
  spend_limit: spendLimitSchema.nullable().optional(),
});

const patchSchema = z.strictObject({
  name: name.optional(),
  model_allowlist: z.array(z.string().min(1)).max(500).optional(),
  spend_limit: spendLimitSchema.nullable().optional(),
  archived: z.boolean().optional(),
});

function slugify(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 48) || 'project';
}

export const projectsResource: ResourceType<ProjectRow> = {
  type: 'projects',
  object: 'project',
  scope: 'projects',
  table: projects,
  readSchema: z.object({
    name: z.string(),
    slug: z.string(),
    model_allowlist: z.array(z.string()),
    spend_limit: spendLimitSchema.nullable(),
    archived: z.boolean(),
    archived_at: unixTime.nullable(),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    const query = db.select().from(projects).where(and(eq(projects.orgId, orgId), eq(projects.id, id)));
    return selectOne(query, forUpdate);
  },

  list(db, principal, page) {
    return newestFirst(db, projects, and(eq(projects.orgId, principal.orgId), inProjects(principal.projectIds, projects.id)), page);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    // A new project is outside every list a restricted token holds: creating one is an organization-wide write.
    if (call.principal.projectIds) {
      throw new GatewayError('project_restricted', 'This token is restricted to projects; creating a project needs an unrestricted token.');
    }
    const id = newId('proj');
    // A slug names the project in routes and logs; unique per organization.
    const wanted = input.slug ?? `${slugify(input.name)}-${id.slice(-6)}`;
    const [row] = await call.db
      .insert(projects)
      .values({
        id,
        orgId: call.principal.orgId,
        name: input.name,
        slug: wanted,
        modelAllowlist: input.model_allowlist ?? [],
        spendLimit: input.spend_limit ?? null,
      })
      .onConflictDoNothing({ target: [projects.orgId, projects.slug] })
      .returning();
    if (!row) throw new GatewayError('invalid_request', `Invalid \`slug\`: \`${wanted}\` is already used by another project.`);
    return { row };
  },

  async patch(call, _row, input: z.infer<typeof patchSchema>) {
    return {
      ...(input.name !== undefined && { name: input.name }),
      ...(input.model_allowlist !== undefined && { modelAllowlist: input.model_allowlist }),
      ...(input.spend_limit !== undefined && { spendLimit: input.spend_limit }),
      ...(input.archived !== undefined && { archivedAt: input.archived ? call.now : null }),
    };
  },

  /** Archives; `?purge=true` deletes only a project that never had a key and never served a request. */
  async remove(call, row) {
    if (call.query.purge !== 'true') return { archivedAt: row.archivedAt ?? call.now };
    const [used] = await call.db
      .select({ keys: sql<number>`(select count(*)::int from ${gatewayKeys} where ${gatewayKeys.projectId} = ${row.id})`, requests: sql<number>`(select count(*)::int from ${requestLogs} where ${requestLogs.projectId} = ${row.id})` })
      .from(sql`(select 1) as one`);
    if ((used?.keys ?? 0) > 0 || (used?.requests ?? 0) > 0) {
      throw new GatewayError('project_has_usage', 'This project has had gateway keys or served requests; archive it instead of purging.');
    }
    return 'delete';
  },

  projectOf: (row) => row.id,

  present: (row) => ({
    name: row.name,
    slug: row.slug,
    model_allowlist: row.modelAllowlist,
    spend_limit: row.spendLimit,
    archived: row.archivedAt !== null,
    archived_at: unix(row.archivedAt),
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
