import type { AlertEventType, AlertSeverity, FindingScopeKind, FindingSubject } from '../db/schema';
import { ALERT_SEVERITIES } from '../db/schema';

/**
 * What one detector saw in one window (DESIGN 4b): the detectors are pure functions that answer
 * these, and the store (store.ts) turns each into a finding, one per fingerprint.
 */
export type Detection = {
  orgId: string;
  type: AlertEventType;
  severity: AlertSeverity;
  title: string;
  /** One line a person reads. */
  summary: string;
  scope: { kind: FindingScopeKind; id: string };
  subject: FindingSubject;
  window: { from: Date; to: Date };
  observed: number | null;
  expected: number | null;
  threshold: number | null;
  /** The numbers behind it. */
  evidence: Record<string, unknown>;
};

/**
 * A finding's identity: its type, scope and subject (spec: one finding per fingerprint). The
 * subject's keys are sorted so the same subject always gives the same text.
 */
export function fingerprintOf(d: Pick<Detection, 'type' | 'scope' | 'subject'>): string {
  const subject = Object.keys(d.subject).sort().map((k) => `${k}=${d.subject[k as keyof FindingSubject]}`).join('&');
  return `${d.type}|${d.scope.kind}:${d.scope.id}|${subject}`;
}

export function severityRank(severity: AlertSeverity): number {
  return ALERT_SEVERITIES.indexOf(severity);
}

/** The higher of two severities: a finding's severity only ever moves up while it is live. */
export function higherSeverity(a: AlertSeverity, b: AlertSeverity): AlertSeverity {
  return severityRank(a) >= severityRank(b) ? a : b;
}
