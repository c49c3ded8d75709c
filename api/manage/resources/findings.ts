import { and, eq, gte, inArray, isNull, or } from 'drizzle-orm';
import { historyStart } from '../../../core/observability/history';
import { z } from 'zod';
import { ALERT_EVENT_TYPES, ALERT_SEVERITIES, FINDING_STATUSES, findings, type FindingRow } from '../../../core/db/schema';
import { findingFields, presentFinding } from '../../../core/findings/present';
import { newestFirst, selectOne, type ResourceType } from './resource-type';

const listFilters = z.object({
  status: z.enum(FINDING_STATUSES).optional(),
  type: z.enum(ALERT_EVENT_TYPES).optional(),
  severity: z.enum(ALERT_SEVERITIES).optional(),
});

/**
 * Findings (spec 4.4): made by the detectors (core/findings), never by a client; read, and
 * acknowledged. Served by the resource framework for its scopes, paging and audit; as a data
 * operation (spec 4.4) its answers carry no version and no ETag.
 */
export const findingsResource: ResourceType<FindingRow> = {
  type: 'findings',
  object: 'finding',
  scope: 'findings',
  data: true,
  table: findings,
  readSchema: findingFields,
  listFilters,

  async find(db, orgId, id, { forUpdate }) {
    return selectOne(db.select().from(findings).where(and(eq(findings.orgId, orgId), eq(findings.id, id))), forUpdate);
  },

  // A project-restricted token reads its projects' findings and the organization-wide ones, and
  // acknowledges only its projects' (the framework's rule for rows of no project).
  projectOf: (row) => row.projectId,

  list(db, principal, page, filters: z.infer<typeof listFilters>) {
    return newestFirst(db, findings, and(
      eq(findings.orgId, principal.orgId),
      principal.projectIds ? or(isNull(findings.projectId), inArray(findings.projectId, principal.projectIds)) : undefined,
      // Spec 4.4: data reads reach back only the plan's history window; a finding still seen is recent.
      gte(findings.lastSeenAt, historyStart(principal.plan, new Date())),
      filters.status ? eq(findings.status, filters.status) : undefined,
      filters.type ? eq(findings.type, filters.type) : undefined,
      filters.severity ? eq(findings.severity, filters.severity) : undefined,
    ), page);
  },

  actions: {
    acknowledge: {
      summary: 'Acknowledge the finding: records who and when; takes no ownership. It stays live until its condition clears.',
      schema: z.strictObject({}),
      ifMatch: 'optional',
      async run(call, row: FindingRow) {
        if (row.acknowledgedAt) return {};
        return {
          changes: { status: row.status === 'open' ? 'acknowledged' : row.status, acknowledgedAt: call.now, acknowledgedBy: call.principal.tokenId },
        };
      },
    },
  },

  present: presentFinding,
};
