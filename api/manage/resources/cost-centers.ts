import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { costCenters, type CostCenterRow } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { nameField, unixTime } from './fields';
import { newestFirst, selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

const code = z.string().regex(/^[A-Za-z0-9._-]{1,40}$/, 'expected 1 to 40 letters, digits, `.`, `_` or `-`');
const ownerEmail = z.email().max(254).nullable();

const createSchema = z.strictObject({ name: nameField, code, owner_email: ownerEmail.optional() });
const patchSchema = z.strictObject({ name: nameField.optional(), code: code.optional(), owner_email: ownerEmail.optional() });

/** Cost centers (spec 2.6, issue 23): who spend is charged to. Delete archives. */
export const costCentersResource: ResourceType<CostCenterRow> = {
  type: 'cost_centers',
  object: 'cost_center',
  scope: 'costs',
  table: costCenters,
  readSchema: z.object({
    name: z.string(),
    code: z.string(),
    owner_email: z.string().nullable(),
    archived: z.boolean().describe('An archived center receives no new allocations; a rule pointing only at it allocates to "unallocated".'),
    archived_at: unixTime.nullable(),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    return selectOne(db.select().from(costCenters).where(and(eq(costCenters.orgId, orgId), eq(costCenters.id, id))), forUpdate);
  },

  list(db, principal, page) {
    return newestFirst(db, costCenters, eq(costCenters.orgId, principal.orgId), page);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const [row] = await call.db.insert(costCenters).values({
      id: newId('ccen'), orgId: call.principal.orgId, name: input.name, code: input.code, ownerEmail: input.owner_email ?? null,
    }).returning();
    return { row: row! };
  },

  async patch(_call, _row, input: z.infer<typeof patchSchema>) {
    return {
      ...(input.name !== undefined && { name: input.name }),
      ...(input.code !== undefined && { code: input.code }),
      ...(input.owner_email !== undefined && { ownerEmail: input.owner_email }),
    };
  },

  async remove(call, row) {
    return { archivedAt: row.archivedAt ?? call.now };
  },

  uniqueConflict: (constraint) =>
    constraint === 'cost_centers_org_code' ? new GatewayError('invalid_request', 'Invalid `code`: another cost center of the organization already uses it.') : undefined,

  present: (row) => ({
    name: row.name,
    code: row.code,
    owner_email: row.ownerEmail,
    archived: row.archivedAt !== null,
    archived_at: unix(row.archivedAt),
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
