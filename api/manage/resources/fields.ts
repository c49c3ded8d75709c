import { and, eq, inArray } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../../core/db/client';
import { environments as environmentsTable, projects } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';

/** Field shapes several management resources share (spec 2.6). */

export const nameField = z.string().trim().min(1).max(80);

/** A name applications send in a request (a route as `model`, a decision policy in its path): no spaces, like a model id. */
export const slugField = z.string().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9._:/@-]*$/, 'letters, digits and . _ : / @ -');

export const timeoutMsField = z.number().int().min(1000).max(600_000);

export const spendLimitSchema = z.strictObject({
  monthly: z.number().positive().max(1_000_000_000),
  behavior: z.enum(['alert', 'block']),
  alert_at: z.array(z.number().gt(0).max(1)).max(10).optional(),
});

const environmentId = z.string().min(1).max(64);

/** `environments` and the deprecated single `environment`, as on connections and routes. */
export const environmentFields = {
  environments: z.array(environmentId).max(20).nullable(),
  environment: environmentId.nullable(),
};

export const environmentsRead = {
  environments: z.array(z.string()).describe('Empty means every environment, including keys with none.'),
  environment: z.string().nullable().describe('Deprecated: the first entry of `environments`, or null.'),
};

/**
 * The environment list a write asks for, or undefined when it names none (spec 2.6): the single
 * form means `[environment]` (null: every environment); beside the list it must equal the
 * list's first entry. Each must be one of the organization's environments.
 */
export async function resolveEnvironments(
  db: Executor,
  orgId: string,
  input: { environments?: string[] | null; environment?: string | null },
): Promise<string[] | undefined> {
  const { environments: list, environment: single } = input;
  if (list === undefined && single === undefined) return undefined;
  const wanted = list !== undefined ? [...new Set(list ?? [])] : single === null || single === undefined ? [] : [single];
  if (list !== undefined && single !== undefined && single !== (wanted[0] ?? null)) {
    throw new GatewayError('invalid_request', 'Invalid `environment`: beside `environments` it must equal the first entry of that list.');
  }
  if (wanted.length > 0) {
    const known = await db.select({ slug: environmentsTable.slug }).from(environmentsTable)
      .where(and(eq(environmentsTable.orgId, orgId), inArray(environmentsTable.slug, wanted)));
    const missing = wanted.find((w) => !known.some((k) => k.slug === w));
    if (missing) throw new GatewayError('invalid_request', `Invalid \`environments\`: the organization has no environment \`${missing}\`.`);
  }
  return wanted;
}

export function presentEnvironments(list: string[]) {
  return { environments: list, environment: list[0] ?? null };
}

/** Wire shape of timestamps: Unix seconds. */
export const unixTime = z.number().int();

/** `project_ids` of a resource that some projects' keys may reach (empty: all): every one must be the organization's. */
export async function checkProjects(db: Executor, orgId: string, ids: string[]): Promise<string[]> {
  const wanted = [...new Set(ids)];
  if (wanted.length === 0) return [];
  const known = await db.select({ id: projects.id }).from(projects).where(and(eq(projects.orgId, orgId), inArray(projects.id, wanted)));
  const missing = wanted.find((w) => !known.some((k) => k.id === w));
  if (missing) throw new GatewayError('invalid_request', `Invalid \`project_ids\`: the organization has no project \`${missing}\`.`);
  return wanted;
}
