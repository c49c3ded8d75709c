import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { decisionPolicies, type DecisionPolicyRow } from '../../../core/db/schema';
import { compileOutputSchema, schemaViolation } from '../../../core/decisions/output-schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { checkProjects, nameField, slugField, unixTime } from './fields';
import { newestFirst, selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

/** Deadlines a policy may set (issue 24). */
export const DECISION_DEADLINE_MS = { min: 100, max: 120_000 } as const;
export const MAX_INSTRUCTIONS_CHARS = 20_000;

const settable = {
  name: nameField,
  description: z.string().max(2_000).nullable(),
  enabled: z.boolean(),
  model: z.string().min(1).max(256).describe('A route slug or a model id, resolved as chat resolves `model`.'),
  instructions: z.string().max(MAX_INSTRUCTIONS_CHARS).describe('System text sent before the input.'),
  output_schema: z.record(z.string(), z.unknown()).describe('A JSON Schema (draft-07) for an object; the answer must be valid against it.'),
  deadline_ms: z.number().int().min(DECISION_DEADLINE_MS.min).max(DECISION_DEADLINE_MS.max),
  fallback: z.record(z.string(), z.unknown()).nullable().describe('Answered when the model is too slow, wrong or unreachable; valid against `output_schema`. Null: none.'),
  project_ids: z.array(z.string().min(1).max(64)).max(100).describe('Projects whose keys may call it; empty means every project.'),
  max_tokens: z.number().int().min(1).max(100_000).nullable(),
};
const createSchema = z.strictObject({
  slug: slugField,
  name: settable.name.optional(),
  description: settable.description.optional(),
  enabled: settable.enabled.optional(),
  model: settable.model,
  instructions: settable.instructions.optional(),
  output_schema: settable.output_schema,
  deadline_ms: settable.deadline_ms.optional(),
  fallback: settable.fallback.optional(),
  project_ids: settable.project_ids.optional(),
  max_tokens: settable.max_tokens.optional(),
});
const patchSchema = z.strictObject(settable).partial();

/** When a policy sets none: long enough for a small structured answer from most models. */
export const DEFAULT_DECISION_DEADLINE_MS = 10_000;

/** The schema must compile and describe an object; a fallback must be valid against it. */
function checkSchemaAndFallback(schema: Record<string, unknown>, fallback: Record<string, unknown> | null): void {
  const compiled = compileOutputSchema(schema);
  if (!compiled.ok) throw new GatewayError('invalid_request', `Invalid \`output_schema\`: ${compiled.reason}.`);
  if (fallback === null) return;
  const violation = schemaViolation(compiled.validate, fallback);
  if (violation) throw new GatewayError('invalid_request', `Invalid \`fallback\`: it is not valid against \`output_schema\` (${violation}).`);
}

/**
 * Decision policies (issue 24): named, schema-checked decisions a key asks for at
 * `POST /v1/decisions/{slug}`. `slug` is set at create and never changes; every write moves the
 * version, and each decision records the version that answered it.
 */
export const decisionPoliciesResource: ResourceType<DecisionPolicyRow> = {
  type: 'decision_policies',
  object: 'decision_policy',
  scope: 'decisions',
  table: decisionPolicies,
  readSchema: z.object({
    slug: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    enabled: z.boolean(),
    model: z.string(),
    instructions: z.string(),
    output_schema: z.record(z.string(), z.unknown()),
    deadline_ms: z.number().int(),
    fallback: z.record(z.string(), z.unknown()).nullable(),
    project_ids: z.array(z.string()),
    max_tokens: z.number().int().nullable(),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    return selectOne(db.select().from(decisionPolicies).where(and(eq(decisionPolicies.orgId, orgId), eq(decisionPolicies.id, id))), forUpdate);
  },

  list(db, principal, page) {
    return newestFirst(db, decisionPolicies, eq(decisionPolicies.orgId, principal.orgId), page);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const fallback = input.fallback ?? null;
    checkSchemaAndFallback(input.output_schema, fallback);
    const [row] = await call.db.insert(decisionPolicies).values({
      id: newId('dpol'), orgId: call.principal.orgId, slug: input.slug, name: input.name ?? input.slug, description: input.description ?? null,
      enabled: input.enabled ?? true, model: input.model, instructions: input.instructions ?? '', outputSchema: input.output_schema,
      deadlineMs: input.deadline_ms ?? DEFAULT_DECISION_DEADLINE_MS, fallback, projectIds: await checkProjects(call.db, call.principal.orgId, input.project_ids ?? []),
      maxTokens: input.max_tokens ?? null,
    }).returning();
    return { row: row! };
  },

  async patch(call, row, input: z.infer<typeof patchSchema>) {
    // A new schema, a new fallback or both: the pair that results must agree.
    if (input.output_schema !== undefined || input.fallback !== undefined) {
      checkSchemaAndFallback(input.output_schema ?? row.outputSchema, input.fallback === undefined ? row.fallback : input.fallback);
    }
    return {
      ...(input.name !== undefined && { name: input.name }),
      ...(input.description !== undefined && { description: input.description }),
      ...(input.enabled !== undefined && { enabled: input.enabled }),
      ...(input.model !== undefined && { model: input.model }),
      ...(input.instructions !== undefined && { instructions: input.instructions }),
      ...(input.output_schema !== undefined && { outputSchema: input.output_schema }),
      ...(input.deadline_ms !== undefined && { deadlineMs: input.deadline_ms }),
      ...(input.fallback !== undefined && { fallback: input.fallback }),
      ...(input.project_ids !== undefined && { projectIds: await checkProjects(call.db, row.orgId, input.project_ids) }),
      ...(input.max_tokens !== undefined && { maxTokens: input.max_tokens }),
    };
  },

  async remove() {
    return 'delete';
  },

  uniqueConflict: (constraint) =>
    constraint === 'decision_policies_org_slug' ? new GatewayError('invalid_request', 'Invalid `slug`: another decision policy of the organization already uses it.') : undefined,

  present: (row) => ({
    slug: row.slug,
    name: row.name,
    description: row.description,
    enabled: row.enabled,
    model: row.model,
    instructions: row.instructions,
    output_schema: row.outputSchema,
    deadline_ms: row.deadlineMs,
    fallback: row.fallback,
    project_ids: row.projectIds,
    max_tokens: row.maxTokens,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
