import { and, eq, inArray, isNull } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../../core/db/client';
import { costCenterRules, costCenterRuleVersions, costCenters, type CostAllocation, type CostCenterMatch, type CostCenterRuleRow } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { afterCursor, keysetOrder, type Keyset } from '../../../core/paging';
import { unixTime } from './fields';
import { newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

/** A match value: exact, or a prefix when it ends in `*`. */
const matchValue = z.string().min(1).max(200);
const matchSchema = z.strictObject({
  project_id: matchValue.optional(),
  key_id: matchValue.optional().describe('A key id: every key of its lineage (keys rotated from it) matches. With `*`, a prefix of the key id.'),
  model: matchValue.optional().describe('The model as the client named it: for a request or a video job through a route, the route\'s slug (also `route`); otherwise the model asked for, e.g. `openai/gpt-4o`.'),
  provider: matchValue.optional(),
  route: matchValue.optional(),
  user_id: matchValue.optional(),
  tags: z.record(z.string().min(1).max(64), matchValue).refine((t) => Object.keys(t).length <= 20, 'at most 20 tags').optional(),
}).describe('Conditions that must all hold; a value ending in `*` matches by prefix. `{}` matches every request.');

/** Percent with at most two decimals, kept exact as hundredths. */
const percent = z.number().gt(0).max(100).refine((p) => Math.abs(Math.round(p * 100) - p * 100) < 1e-6, 'at most two decimals');
const allocationSchema = z.array(z.strictObject({ cost_center_id: z.string().min(1).max(64), percent })).min(1).max(20)
  .refine((a) => a.reduce((sum, s) => sum + Math.round(s.percent * 100), 0) === 10_000, 'the percents must sum to exactly 100')
  .refine((a) => new Set(a.map((s) => s.cost_center_id)).size === a.length, 'each cost center at most once');

const ruleFields = {
  match: matchSchema,
  priority: z.number().int().min(0).max(1_000_000).describe('Lower first; the first matching rule allocates.'),
  note: z.string().max(500).nullable(),
  cost_center_id: z.string().min(1).max(64),
  allocation: allocationSchema,
};
const oneTarget = (r: { cost_center_id?: unknown; allocation?: unknown }) => !(r.cost_center_id !== undefined && r.allocation !== undefined);
const createSchema = z.strictObject({
  match: ruleFields.match, priority: ruleFields.priority, note: ruleFields.note.optional(),
  cost_center_id: ruleFields.cost_center_id.optional(), allocation: ruleFields.allocation.optional(),
})
  .refine(oneTarget, { message: 'give exactly one of `cost_center_id` and `allocation`', path: ['allocation'] })
  .refine((r) => r.cost_center_id !== undefined || r.allocation !== undefined, { message: 'give exactly one of `cost_center_id` and `allocation`', path: ['cost_center_id'] });
const patchSchema = z.strictObject(ruleFields).partial()
  .refine(oneTarget, { message: 'give at most one of `cost_center_id` and `allocation`', path: ['allocation'] });

type RuleContent = { match: CostCenterMatch; priority: number; note: string | null; costCenterId: string | null; allocation: CostAllocation | null };

/** Every cost center a rule names must be the organization's (an archived one allocates to "unallocated"). */
async function checkCenters(db: Executor, orgId: string, content: RuleContent): Promise<void> {
  const ids = content.costCenterId ? [content.costCenterId] : (content.allocation ?? []).map((s) => s.cost_center_id);
  const found = await db.select({ id: costCenters.id }).from(costCenters).where(and(eq(costCenters.orgId, orgId), inArray(costCenters.id, ids)));
  const missing = ids.find((id) => !found.some((f) => f.id === id));
  if (missing) throw new GatewayError('invalid_request', `Invalid \`${content.costCenterId ? 'cost_center_id' : 'allocation'}\`: the organization has no cost center \`${missing}\`.`);
}

/** Appends a version with this content; answers its id. */
async function appendVersion(call: ResourceCall, ruleId: string, version: number, content: RuleContent, ended = false): Promise<string> {
  const id = newId('ccrv', call.now.getTime());
  await call.db.insert(costCenterRuleVersions).values({
    id, ruleId, orgId: call.principal.orgId, version, match: content.match, priority: content.priority, note: content.note,
    costCenterId: content.costCenterId, allocation: content.allocation, ended, effectiveAt: call.now, actorTokenId: call.principal.tokenId,
  });
  return id;
}

const contentOf = (row: CostCenterRuleRow): RuleContent => ({ match: row.match, priority: row.priority, note: row.note, costCenterId: row.costCenterId, allocation: row.allocation });

const ruleRead = {
  version_id: z.string().describe('The current version; a request records the version that allocated it.'),
  match: matchSchema,
  priority: z.number().int(),
  note: z.string().nullable(),
  cost_center_id: z.string().nullable(),
  allocation: z.array(z.object({ cost_center_id: z.string(), percent: z.number() })).nullable(),
};

const VERSION_ORDER: Keyset = { key: costCenterRuleVersions.id, id: costCenterRuleVersions.id, order: 'asc', type: 'text' };

/**
 * Cost-center rules (spec 2.6, 9.3; issue 23): the id is the lineage's and never changes; each
 * create, patch (merged over the current rule) and delete appends a version, listed at
 * `GET /cost_center_rules/{id}/versions`.
 */
export const costCenterRulesResource: ResourceType<CostCenterRuleRow> = {
  type: 'cost_center_rules',
  object: 'cost_center_rule',
  scope: 'costs',
  table: costCenterRules,
  readSchema: z.object({ ...ruleRead, created_at: unixTime, updated_at: unixTime }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate, includeHidden }) {
    return selectOne(db.select().from(costCenterRules).where(and(
      eq(costCenterRules.orgId, orgId), eq(costCenterRules.id, id), includeHidden ? undefined : isNull(costCenterRules.endedAt),
    )), forUpdate);
  },

  list(db, principal, page) {
    return newestFirst(db, costCenterRules, and(eq(costCenterRules.orgId, principal.orgId), isNull(costCenterRules.endedAt)), page);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const content: RuleContent = { match: input.match, priority: input.priority, note: input.note ?? null, costCenterId: input.cost_center_id ?? null, allocation: input.allocation ?? null };
    await checkCenters(call.db, call.principal.orgId, content);
    const id = newId('ccr', call.now.getTime());
    // The lineage row first (the version refers to it), then its first version.
    const versionId = newId('ccrv', call.now.getTime());
    const [row] = await call.db.insert(costCenterRules).values(Object.assign({ id, orgId: call.principal.orgId, versionId, createdAt: call.now, updatedAt: call.now }, content)).returning();
    await call.db.insert(costCenterRuleVersions).values({
      id: versionId, ruleId: id, orgId: call.principal.orgId, version: 1, match: content.match, priority: content.priority, note: content.note,
      costCenterId: content.costCenterId, allocation: content.allocation, effectiveAt: call.now, actorTokenId: call.principal.tokenId,
    });
    return { row: row!, auditDetail: { version_id: versionId } };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    const current = contentOf(row);
    const next: RuleContent = {
      match: input.match ?? current.match,
      priority: input.priority ?? current.priority,
      note: input.note !== undefined ? input.note : current.note,
      // Naming one target replaces the other.
      costCenterId: input.allocation !== undefined ? null : input.cost_center_id ?? current.costCenterId,
      allocation: input.cost_center_id !== undefined ? null : input.allocation ?? current.allocation,
    };
    await checkCenters(call.db, call.principal.orgId, next);
    const versionId = await appendVersion(call, row.id, row.version + 1, next);
    return Object.assign({ versionId }, next);
  },

  async remove(call, row) {
    const versionId = await appendVersion(call, row.id, row.version + 1, contentOf(row), true);
    return { hide: { endedAt: call.now, versionId } };
  },

  subLists: {
    versions: {
      summary: 'Every version of the rule, oldest first: what it was, from when, and who made it.',
      itemSchema: z.object({
        id: z.string(), object: z.literal('cost_center_rule_version'), rule_id: z.string(), version: z.number().int(), ...ruleRead,
        ended: z.boolean().describe('The final version of a deleted rule.'), effective_at: unixTime, actor_token_id: z.string().nullable(),
      }).omit({ version_id: true }),
      async list(db, row, page) {
        const rows = await db.select().from(costCenterRuleVersions)
          .where(and(eq(costCenterRuleVersions.ruleId, row.id), afterCursor(VERSION_ORDER, page.after)))
          .orderBy(...keysetOrder(VERSION_ORDER)).limit(page.limit + 1);
        return rows.map((v) => ({
          cursor: { at: v.id, id: v.id },
          entry: {
            id: v.id, object: 'cost_center_rule_version', rule_id: v.ruleId, version: v.version, match: v.match, priority: v.priority, note: v.note,
            cost_center_id: v.costCenterId, allocation: v.allocation, ended: v.ended, effective_at: unix(v.effectiveAt), actor_token_id: v.actorTokenId,
          },
        }));
      },
    },
  },

  present: (row) => ({
    version_id: row.versionId,
    match: row.match,
    priority: row.priority,
    note: row.note,
    cost_center_id: row.costCenterId,
    allocation: row.allocation,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
