import type { FindingSubject } from '../../db/schema';
import type { Detection } from '../detection';
import { formatCount, formatRange } from './robust';

/**
 * The models that served what callers asked for (a route, or a model name routing resolves) in
 * a window, against those that served it in the seven days before.
 */
export type ServedModels = {
  orgId: string;
  asked: { kind: 'route' | 'model'; id: string };
  from: Date;
  to: Date;
  /** Served model -> requests in the window. */
  current: Record<string, number>;
  /** Models served for it in the trailing seven days before the window. */
  trailing: string[];
  /** False while there is not yet a trailing week to compare with: everything would look new. */
  hasHistory: boolean;
};

/** One connection's answers naming a different model than was asked of it. */
export type AnsweredMismatch = {
  orgId: string;
  connectionId: string;
  asked: string;
  answered: string;
  requests: number;
  from: Date;
  to: Date;
};

/**
 * One warning per model now serving a route or model name that did not serve it in the trailing
 * week (a fallback taking over, a routing change): answers may differ in quality and cost. The
 * subject names the served model (and the route); for an asked model the asked name is only in
 * the evidence, so one new model serving two asked names is one finding.
 */
export function detectModelChanged(s: ServedModels): Detection[] {
  if (!s.hasHistory) return [];
  const previously = new Set(s.trailing);
  const previouslyServed = s.trailing.slice().sort();
  const asked = s.asked.kind === 'route' ? `route ${s.asked.id}` : s.asked.id;
  const before = previouslyServed.length > 0
    ? `only ${previouslyServed.join(', ')} served it in the previous seven days`
    : 'nothing served it in the previous seven days';
  const detections: Detection[] = [];
  for (const served of Object.keys(s.current).sort()) {
    const requests = s.current[served]!;
    if (previously.has(served) || !(requests > 0)) continue;
    const subject: FindingSubject = s.asked.kind === 'route' ? { route: s.asked.id, model: served } : { model: served };
    detections.push({
      orgId: s.orgId,
      type: 'traffic.model_changed',
      severity: 'warning',
      title: `${served} now serving ${asked}`,
      summary: `${served} answered ${formatCount(requests)} requests for ${asked} ${formatRange(s.from, s.to)}; ${before}.`,
      scope: { kind: 'organization', id: s.orgId },
      subject,
      window: { from: s.from, to: s.to },
      observed: requests,
      expected: null,
      threshold: null,
      evidence: { asked_kind: s.asked.kind, asked: s.asked.id, served, requests, previously_served: previouslyServed },
    });
  }
  return detections;
}

/**
 * A provider answering with a model other than the one asked of it (an alias resolving to a new
 * snapshot, a silent substitution). Informational: it is often a dated name for the same model.
 */
export function detectAnsweredMismatch(m: AnsweredMismatch): Detection | null {
  if (m.answered === m.asked || !(m.requests > 0)) return null;
  return {
    orgId: m.orgId,
    type: 'traffic.model_changed',
    severity: 'info',
    title: `Connection ${m.connectionId} answers ${m.asked} with ${m.answered}`,
    summary: `Connection ${m.connectionId} was asked for ${m.asked} and answered as ${m.answered} on ${formatCount(m.requests)} `
      + `${m.requests === 1 ? 'request' : 'requests'} ${formatRange(m.from, m.to)}.`,
    scope: { kind: 'connection', id: m.connectionId },
    subject: { model: m.asked },
    window: { from: m.from, to: m.to },
    observed: m.requests,
    expected: null,
    threshold: null,
    evidence: { asked: m.asked, answered: m.answered, requests: m.requests },
  };
}
