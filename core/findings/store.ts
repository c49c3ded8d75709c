import { and, eq, gt, inArray, lte, ne, sql } from 'drizzle-orm';
import type { Executor } from '../db/client';
import { findings, type AlertEventType, type FindingRow } from '../db/schema';
import { newId } from '../ids';
import type { QueuedDelivery } from '../webhooks/fan-out';
import { fingerprintOf, higherSeverity, severityRank, type Detection } from './detection';
import { queueFindingNotifications } from './notify';

/**
 * What a detection did to its finding: `opened` a new one, `raised` a live one's severity, or
 * `updated` a live one (seen again, nothing to tell anyone). Opened and raised are notified.
 */
export type FindingChange = { finding: FindingRow; change: 'opened' | 'raised' | 'updated'; deliveries: QueuedDelivery[] };

/** Where notification links point (the API's public address); null records without notifying. */
export type NotifyOptions = { publicUrl: string } | null;

/** The project a detection is about: its scope's, or the one a key's detection names in its evidence. */
export function projectOf(detection: Pick<Detection, 'scope' | 'evidence'>): string | null {
  if (detection.scope.kind === 'project') return detection.scope.id;
  const named = detection.evidence.project_id;
  return typeof named === 'string' ? named : null;
}

/**
 * Records one detection: while a finding with its fingerprint is live (open or acknowledged) it
 * is updated (last seen, occurrences, the latest numbers, severity only upward); otherwise a new
 * one opens. The partial unique index on live fingerprints makes a concurrent twin fail its
 * insert, and the update path is then taken. An opened or raised finding's notifications are
 * queued in the same transaction (notify.ts): the deliveries to start after it commits.
 */
export async function recordDetection(db: Executor, detection: Detection, now: Date, notify: NotifyOptions = null): Promise<FindingChange> {
  const fingerprint = fingerprintOf(detection);
  for (let attempt = 0; ; attempt++) {
    const result = await db.transaction(async (tx) => {
      const [live] = await tx.select().from(findings)
        .where(and(eq(findings.orgId, detection.orgId), eq(findings.fingerprint, fingerprint), ne(findings.status, 'resolved')))
        .for('update');
      if (live) {
        const severity = higherSeverity(live.severity, detection.severity);
        const [finding] = await tx.update(findings).set({
          severity,
          title: detection.title,
          summary: detection.summary,
          windowTo: detection.window.to,
          observed: detection.observed,
          expected: detection.expected,
          threshold: detection.threshold,
          evidence: detection.evidence,
          lastSeenAt: now,
          occurrences: live.occurrences + 1,
          version: live.version + 1,
          updatedAt: now,
        }).where(eq(findings.id, live.id)).returning();
        const change: FindingChange['change'] = severityRank(severity) > severityRank(live.severity) ? 'raised' : 'updated';
        const deliveries = change === 'raised' && notify ? await queueFindingNotifications(tx, finding!, now, notify.publicUrl) : [];
        if (deliveries.length > 0) await tx.update(findings).set({ notifiedAt: now }).where(eq(findings.id, live.id));
        return { finding: finding!, change, deliveries };
      }
      const [finding] = await tx.insert(findings).values({
        id: newId('fnd', now.getTime()),
        orgId: detection.orgId,
        type: detection.type,
        severity: detection.severity,
        fingerprint,
        title: detection.title,
        summary: detection.summary,
        scopeKind: detection.scope.kind,
        scopeId: detection.scope.id,
        projectId: projectOf(detection),
        subject: detection.subject,
        windowFrom: detection.window.from,
        windowTo: detection.window.to,
        observed: detection.observed,
        expected: detection.expected,
        threshold: detection.threshold,
        evidence: detection.evidence,
        firstSeenAt: now,
        lastSeenAt: now,
        createdAt: now,
        updatedAt: now,
      }).onConflictDoNothing().returning();
      if (!finding) return null;
      // A condition that flaps (resolved, then back) opens a finding each time; it notifies
      // once an hour at most, counted across the fingerprint's findings.
      const flapping = notify && FLAPPING_TYPES.has(detection.type) ? await notifiedSince(tx, detection.orgId, fingerprint, new Date(now.getTime() - RENOTIFY_AFTER_MS)) : false;
      const deliveries = notify && !flapping ? await queueFindingNotifications(tx, finding, now, notify.publicUrl) : [];
      if (deliveries.length > 0) await tx.update(findings).set({ notifiedAt: now }).where(eq(findings.id, finding.id));
      return { finding, change: 'opened' as const, deliveries };
    });
    if (result) return result;
    if (attempt > 0) throw new Error(`finding ${fingerprint} could neither be opened nor found live`);
  }
}

/** A fingerprint whose finding was notified this recently is not notified again when it reopens. */
export const RENOTIFY_AFTER_MS = 3_600_000;

/**
 * Health conditions that come and go (a connection failing on and off): their reopenings are
 * the flapping the hourly limit is for. Events (a tool's definition changed again, a budget
 * crossed, a price changed) are news each time and always notify.
 */
const FLAPPING_TYPES: ReadonlySet<string> = new Set(['connection.failing', 'mcp.server_failing', 'traffic.regression']);

async function notifiedSince(db: Executor, orgId: string, fingerprint: string, since: Date): Promise<boolean> {
  const [row] = await db.select({ id: findings.id }).from(findings)
    .where(and(eq(findings.orgId, orgId), eq(findings.fingerprint, fingerprint), gt(findings.notifiedAt, since))).limit(1);
  return row !== undefined;
}

/**
 * Resolves the live findings of these types whose condition has been clear for a whole
 * detection window: not seen since `clearSince`. Answers the resolved ones.
 */
export async function resolveCleared(db: Executor, types: readonly AlertEventType[], clearSince: Date, now: Date, orgIds?: readonly string[]): Promise<FindingRow[]> {
  if (types.length === 0 || orgIds?.length === 0) return [];
  return db.update(findings)
    .set({ status: 'resolved', resolvedAt: now, updatedAt: now, version: sql`${findings.version} + 1` })
    .where(and(
      inArray(findings.type, [...types]),
      ne(findings.status, 'resolved'),
      lte(findings.lastSeenAt, clearSince),
      orgIds ? inArray(findings.orgId, [...orgIds]) : undefined,
    ))
    .returning();
}

/** Resolves the live finding with this fingerprint, if any (its condition is known to be over). */
export async function resolveFinding(db: Executor, orgId: string, fingerprint: string, now: Date): Promise<void> {
  await db.update(findings)
    .set({ status: 'resolved', resolvedAt: now, updatedAt: now, version: sql`${findings.version} + 1` })
    .where(and(eq(findings.orgId, orgId), eq(findings.fingerprint, fingerprint), ne(findings.status, 'resolved')));
}

/** `<org id>|<fingerprint>` of every finding of this type in these organizations, resolved ones included. */
export async function knownFingerprints(db: Executor, type: AlertEventType, orgIds: string[]): Promise<Set<string>> {
  if (orgIds.length === 0) return new Set();
  const rows = await db.selectDistinct({ orgId: findings.orgId, fingerprint: findings.fingerprint }).from(findings)
    .where(and(eq(findings.type, type), inArray(findings.orgId, orgIds)));
  return new Set(rows.map((r) => `${r.orgId}|${r.fingerprint}`));
}
