import type Router from '@koa/router';
import { asc, eq } from 'drizzle-orm';
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import type { Database } from '../../../core/db/client';
import { endUserCapOverrides, endUserCapRules } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { MAX_PAGE_SIZE, type Cursor } from '../../../core/paging';
import type { GatewayState } from '../../context';
import { authorize } from '../../middleware/management-auth';
import { present as presentOverride } from '../end-user-cap-overrides';
import type { ResourceType } from '../resources/resource-type';
import { envelope } from '../resources/router';

/**
 * `GET /export` (spec 4.4, issue 13): the organization's whole configuration as one JSON
 * document. Every resource type of the framework is read with its own `list` (or `find` for a
 * singleton) and shown with its own `present` through the framework's `envelope`, so each entry
 * is exactly what `GET /<type>` answers: no secret or sealed value (presenters never show one),
 * and no data operation (budget status, audit log, request log, usage). End-customer cap
 * overrides, which live under their rule rather than in the framework, are included as GET
 * shows them.
 *
 * Scope: the read scope of every type it carries (`*:read` covers them all), because the
 * document is those reads at once; each missing one is 403 `insufficient_scope` naming it.
 * A project-restricted token cannot export (403 `project_restricted`): the document is the
 * whole organization's. Both checks come before anything is read.
 *
 * Diffable: types in the order a restore creates them, each type's entries in its list order
 * (newest first, or the type's natural order), keys as GET presents them, pretty-printed,
 * and nothing that changes between two exports of an unchanged configuration.
 */

export const EXPORT_FORMAT_VERSION = 1;

/** The order to re-create types in another organization: each only refers to types before it. */
export const RESTORE_ORDER = [
  'org_settings',
  'projects',
  'provider_connections',
  'model_prices',
  'routes',
  'member_budgets',
  'gateway_keys',
  'webhook_endpoints',
  'notification_channels',
  'notification_rules',
  'cost_centers',
  'cost_center_rules',
  'commitments',
  'end_user_cap_rules',
  'end_user_cap_overrides',
  'guardrail_policies',
  // Decision policies (issue 24) name projects and a route or model.
  'decision_policies',
  // Tool gateway (issue 15): tools are re-made by discovery when a server is registered again.
  'mcp_servers',
  'mcp_server_tools',
  'mcp_key_grants',
] as const;

const OVERRIDES = 'end_user_cap_overrides';
const OVERRIDES_SCOPE = 'end_users:read';

export const exportSchema = z.object({
  object: z.literal('configuration_export'),
  format_version: z.literal(EXPORT_FORMAT_VERSION),
  organization_id: z.string(),
  restore_order: z.array(z.string()).meta({ description: 'The order to re-create the types in another organization.' }),
  resources: z.record(z.string(), z.unknown()).meta({ description: 'Each resource type as `GET /<type>` shows it: a list of objects, or the object of a singleton (`org_settings`). Plus `end_user_cap_overrides`.' }),
}).meta({ id: 'ConfigurationExport' });

function rank(type: string): number {
  const at = (RESTORE_ORDER as readonly string[]).indexOf(type);
  return at === -1 ? RESTORE_ORDER.length : at;
}

export async function exportConfiguration(db: Database, resources: readonly ResourceType[], principal: ManagementPrincipal) {
  const orgId = principal.orgId;
  const sections: Array<[string, unknown]> = [];
  for (const resource of resources) {
    if (resource.singleton) {
      const row = await resource.find(db, orgId, orgId, { forUpdate: false });
      sections.push([resource.type, row ? envelope(resource, row) : null]);
    } else if (resource.list) {
      // Every page of the type's own list, in its order.
      const entries: Array<Record<string, unknown>> = [];
      let after: Cursor | null = null;
      for (;;) {
        const listed = await resource.list(db, principal, { limit: MAX_PAGE_SIZE, after }, {} as never);
        const page = listed.slice(0, MAX_PAGE_SIZE);
        entries.push(...page.map(({ row }) => envelope(resource, row)));
        if (listed.length <= MAX_PAGE_SIZE) break;
        after = page.at(-1)!.cursor;
      }
      sections.push([resource.type, entries]);
    }
  }
  const overrides = await db.select({ override: endUserCapOverrides }).from(endUserCapOverrides)
    .innerJoin(endUserCapRules, eq(endUserCapRules.id, endUserCapOverrides.ruleId))
    .where(eq(endUserCapRules.orgId, orgId))
    .orderBy(asc(endUserCapRules.createdAt), asc(endUserCapRules.id), asc(endUserCapOverrides.endUserId));
  sections.push([OVERRIDES, overrides.map((o) => presentOverride(o.override))]);
  sections.sort((a, b) => rank(a[0]) - rank(b[0]) || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return {
    object: 'configuration_export' as const,
    format_version: EXPORT_FORMAT_VERSION,
    organization_id: orgId,
    restore_order: sections.map(([type]) => type),
    resources: Object.fromEntries(sections),
  };
}

export function exportRoutes(router: Router<GatewayState>, deps: { db: Database; resources: readonly ResourceType[] }): void {
  const scopes = [...new Set([...deps.resources.map((r) => `${r.scope}:read`), OVERRIDES_SCOPE])];
  router.get('/export', async (ctx) => {
    let principal: ManagementPrincipal | undefined;
    for (const scope of scopes) principal = authorize(ctx, scope);
    if (principal!.projectIds) {
      throw new GatewayError('project_restricted', 'This token is restricted to projects; exporting the organization\'s configuration needs an unrestricted token.');
    }
    const document = await exportConfiguration(deps.db, deps.resources, principal!);
    ctx.type = 'application/json';
    ctx.body = `${JSON.stringify(document, null, 2)}\n`;
  });
}

export function exportPaths(errors: Record<string, unknown>, resources: readonly ResourceType[]): ZodOpenApiPathsObject {
  const scopes = [...new Set([...resources.map((r) => `\`${r.scope}:read\``), `\`${OVERRIDES_SCOPE}\``])].join(', ');
  return {
    '/export': {
      get: {
        tags: ['export'],
        operationId: 'exportConfiguration',
        summary: `The organization's whole configuration as one JSON document (format version ${EXPORT_FORMAT_VERSION}): every resource type as GET shows it, without secrets or sealed values, and without data operations. Re-create it elsewhere by creating the types in \`restore_order\`, supplying secrets again. Scopes: ${scopes} (\`*:read\` covers them); an unrestricted token.`,
        responses: { '200': { description: 'The configuration.', content: { 'application/json': { schema: exportSchema } } }, ...errors },
      },
    },
  };
}
