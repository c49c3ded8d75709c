import { z } from 'zod';
import { unixOrNull as unix } from '../clock';
import { ALERT_EVENT_TYPES, ALERT_SEVERITIES, FINDING_SCOPE_KINDS, FINDING_STATUSES, type FindingRow } from '../db/schema';

/** Wire shape of timestamps: Unix seconds. */
const unixTime = z.number().int();

/** The finding as reads answer it and as alert events carry it in `data` (spec 4.4, 6.2). */
export const findingFields = z.object({
  type: z.enum(ALERT_EVENT_TYPES),
  severity: z.enum(ALERT_SEVERITIES),
  status: z.enum(FINDING_STATUSES),
  title: z.string(),
  summary: z.string().describe('One line a person reads.'),
  scope: z.object({ kind: z.enum(FINDING_SCOPE_KINDS), id: z.string() }),
  subject: z.object({ model: z.string().optional(), connection: z.string().optional(), route: z.string().optional(), tool: z.string().optional(), budget: z.string().optional() })
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

