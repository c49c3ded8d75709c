import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { ALERT_EVENT_TYPES, ALERT_SEVERITIES, FINDING_SCOPE_KINDS, FINDING_STATUSES, findings, type FindingRow } from '../../../core/db/schema';
import { unixTime } from './fields';
import { newestFirst, selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

const listFilters = z.object({
  status: z.enum(FINDING_STATUSES).optional(),
  type: z.enum(ALERT_EVENT_TYPES).optional(),
  severity: z.enum(ALERT_SEVERITIES).optional(),
});

/** The finding as reads answer it and as alert events carry it in `data` (spec 4.4, 6.2). */
export const findingFields = z.object({
  type: z.enum(ALERT_EVENT_TYPES),
  severity: z.enum(ALERT_SEVERITIES),
  status: z.enum(FINDING_STATUSES),
  title: z.string(),
  summary: z.string().describe('One line a person reads.'),
  scope: z.object({ kind: z.enum(FINDING_SCOPE_KINDS), id: z.string() }),
  subject: z.object({ model: z.string().optional(), connection: z.string().optional(), route: z.string().optional(), tool: z.string().optional() })
    .describe('The model, connection or route it is about, where one applies.'),
  window: z.object({ from: unixTime, to: unixTime }),
  observed: z.number().nullable(),
  expected: z.number().nullable(),
  threshold: z.number().nullable(),
  evidence: z.record(z.string(), z.unknown()).describe('The numbers behind it.'),
  first_seen_at: unixTime,
  last_seen_at: unixTime,
  resolved_at: unixTime.nullable(),
  acknowledged_at: unixTime.nullable(),
  acknowledged_by: z.string().nullable().describe('The management token that acknowledged it.'),
  occurrences: z.number().int(),
});

export function presentFinding(row: FindingRow): z.infer<typeof findingFields> {
  return {
    type: row.type,
    severity: row.severity,
    status: row.status,
    title: row.title,
    summary: row.summary,
    scope: { kind: row.scopeKind, id: row.scopeId },
    subject: row.subject,
    window: { from: unix(row.windowFrom)!, to: unix(row.windowTo)! },
    observed: row.observed,
    expected: row.expected,
    threshold: row.threshold,
    evidence: row.evidence,
    first_seen_at: unix(row.firstSeenAt)!,
    last_seen_at: unix(row.lastSeenAt)!,
    resolved_at: unix(row.resolvedAt),
    acknowledged_at: unix(row.acknowledgedAt),
    acknowledged_by: row.acknowledgedBy,
    occurrences: row.occurrences,
  };
}

/**
 * Findings (spec 4.4): made by the detectors (core/findings), never by a client; read, and
 * acknowledged. Served by the resource framework for its scopes, paging, ETag and audit.
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

  list(db, principal, page, filters: z.infer<typeof listFilters>) {
    return newestFirst(db, findings, and(
      eq(findings.orgId, principal.orgId),
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
