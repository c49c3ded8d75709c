import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../../core/db/client';
import { memberBudgets, MEMBER_ROLES, members } from '../../../core/db/schema';
import { afterCursor, keysetOrder, timestampKey, type Keyset } from '../../../core/paging';
import { spendLimitSchema, unixTime } from './fields';
import type { ResourceType } from './resource-type';
import { unix } from './router';

type BudgetRow = typeof memberBudgets.$inferSelect & { userId: string; email: string; role: (typeof MEMBER_ROLES)[number] };

const patchSchema = z.strictObject({ spend_limit: spendLimitSchema.nullable() });

/** Every member has a budget row; rows for members added since appear here. */
async function ensureRows(db: Executor, orgId: string, memberId?: string): Promise<void> {
  await db.execute(sql`
    insert into ${memberBudgets} (id, org_id)
    select ${members.id}, ${members.orgId} from ${members}
    where ${members.orgId} = ${orgId} ${memberId ? sql`and ${members.id} = ${memberId}` : sql``}
    on conflict (id) do nothing`);
}

const budgetFields = {
  id: memberBudgets.id,
  orgId: memberBudgets.orgId,
  spendLimit: memberBudgets.spendLimit,
  version: memberBudgets.version,
  managedBy: memberBudgets.managedBy,
  createdAt: memberBudgets.createdAt,
  updatedAt: memberBudgets.updatedAt,
  userId: members.userId,
  email: members.email,
  role: members.role,
};

function selectBudgets(db: Executor) {
  return db.select(budgetFields).from(memberBudgets).innerJoin(members, eq(members.id, memberBudgets.id));
}

/** Natural order: members in the order they joined (the owner first); a budget's id is its member's. */
const BUDGET_ORDER: Keyset = { key: members.createdAt, id: members.id, order: 'asc', type: 'timestamptz' };

/** One spend limit per organization member (spec 2.6); members themselves are not managed here. */
export const memberBudgetsResource: ResourceType<BudgetRow> = {
  type: 'member_budgets',
  object: 'member_budget',
  scope: 'budgets',
  table: memberBudgets,
  readSchema: z.object({
    user_id: z.string(),
    email: z.string(),
    role: z.enum(MEMBER_ROLES),
    spend_limit: spendLimitSchema.nullable(),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  patchSchema,
  writeRole: 'admin',

  async find(db, orgId, id, { forUpdate }) {
    await ensureRows(db, orgId, id);
    const query = selectBudgets(db).where(and(eq(memberBudgets.orgId, orgId), eq(memberBudgets.id, id)));
    const [row] = forUpdate ? await query.for('update', { of: memberBudgets }) : await query;
    return row ?? null;
  },

  async list(db, principal, page) {
    await ensureRows(db, principal.orgId);
    const rows = await db.select({ row: budgetFields, at: timestampKey(members.createdAt) }).from(memberBudgets)
      .innerJoin(members, eq(members.id, memberBudgets.id))
      .where(and(eq(memberBudgets.orgId, principal.orgId), afterCursor(BUDGET_ORDER, page.after)))
      .orderBy(...keysetOrder(BUDGET_ORDER))
      .limit(page.limit + 1);
    return rows.map(({ row, at }) => ({ row, cursor: { at, id: row.id } }));
  },

  async patch(_call, _row, input: z.infer<typeof patchSchema>) {
    return { spendLimit: input.spend_limit };
  },

  present: (row) => ({
    user_id: row.userId,
    email: row.email,
    role: row.role,
    spend_limit: row.spendLimit,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
