import type { ModelCatalog } from '../catalog/model-catalog';
import type { Executor } from '../db/client';
import { costAt, estimateCost } from '../pricing/cost';
import { commitmentAsBudget, commitmentFigures, commitmentSpend } from '../attribution/commitment-figures';
import { resolvedPrice } from '../pricing/resolved-price';
import { isProviderKind } from '../providers/kinds';
import type { PriceEntry } from '../routing/org-config';
import type { AlertEventType } from '../db/schema';
import type { QueuedDelivery } from '../webhooks/fan-out';
import { fingerprintOf, type Detection } from './detection';
import { detectConnectionFailing } from './detectors/connection-failing';
import { detectCostDrift, detectPriceChange } from './detectors/cost-drift';
import { detectForecastOverBudget } from './detectors/forecast-over-budget';
import { detectAnsweredMismatch, detectModelChanged } from './detectors/model-changed';
import { detectSpendAnomaly } from './detectors/spend-anomaly';
import { detectThresholdCrossed } from './detectors/threshold-crossed';
import { detectRegression } from './detectors/traffic-regression';
import { DAY_MS, floorToDay, floorToHour, HOUR_MS, MINUTE_MS } from './detectors/robust';
import { detectUnpricedTraffic } from './detectors/unpriced-traffic';
import { type OrgPage, activeCommitments, answeredMismatches, budgetUses, connectionWindows, orgPrices, providerCostDays, servedModelKeys, readPriceSnapshot, writePriceSnapshot, latencyWindows, recentCrossings, servedModels, spendSeries, unpricedModels } from './series';
import { knownFingerprints, recordDetection, resolveCleared, type NotifyOptions } from './store';

/** `spend.anomaly` fires only on at least this many dollars above the usual hour (issue 22). */
export const ANOMALY_DOLLAR_FLOOR = 5;

/** Settings every detector may read. */
export type ScanSettings = {
  /** `spend.anomaly` needs at least this many dollars above the usual, where the organization set none (issue 22: $5). */
  anomalyDollarFloor: number;
  /** How often the schedules run (5 minutes, scaled): a crossing is looked for this far back, twice over. */
  everyMs: number;
  /** The model catalogue our own estimates price with (loaded once, on the first run that needs it). */
  catalog(): Promise<ModelCatalog>;
};

/**
 * One detector as the schedule runs it: what it reads and decides at `now`, and its detection
 * window, over which a finding must stay clear before it resolves (issue 22).
 */
export type Detector = {
  name: string;
  types: readonly AlertEventType[];
  windowMs(settings: ScanSettings): number;
  /** The detections; with `afterRecorded`, work to do once they are recorded (state the next run compares with). */
  detect(db: Executor, now: Date, settings: ScanSettings, orgs?: OrgPage): Promise<Detection[] | { detections: Detection[]; afterRecorded(): Promise<void> }>;
};

const lastCompleteHour = (now: Date) => new Date(floorToHour(now).getTime() - HOUR_MS);

export const DETECTORS: readonly Detector[] = [
  {
    name: 'spend-anomaly',
    types: ['spend.anomaly'],
    windowMs: () => HOUR_MS,
    async detect(db, now, settings, orgs) {
      const { series, projectOfKey, dollarFloorOf } = await spendSeries(db, lastCompleteHour(now), orgs);
      const found = series
        .map((s) => detectSpendAnomaly(s, now, { dollarFloor: dollarFloorOf.get(s.orgId) ?? settings.anomalyDollarFloor }))
        .filter((d): d is Detection => d !== null);
      return narrowestSpendAnomalies(found, projectOfKey);
    },
  },
  {
    name: 'budget-forecast',
    types: ['spend.forecast_over_budget'],
    windowMs: () => HOUR_MS,
    async detect(db, now, _settings, orgs) {
      const found: Detection[] = [];
      for (const use of await budgetUses(db, now, orgs)) {
        const detection = detectForecastOverBudget(use, now);
        // A key's budget names its project, for rules and restricted tokens scoped to it.
        if (detection) found.push(use.scope.kind === 'key' ? Object.assign(detection, { evidence: Object.assign({ project_id: use.projectId }, detection.evidence) }) : detection);
      }
      // Provider commitments in their period (issue 23): the same forecast on what they consumed.
      for (const c of await activeCommitments(db, now, orgs)) {
        const detection = detectForecastOverBudget(commitmentAsBudget(c, commitmentFigures(c, await commitmentSpend(db, c, now), now)), now);
        if (detection) found.push(detection);
      }
      return found;
    },
  },
  {
    name: 'cost-drift',
    types: ['cost.drift'],
    windowMs: () => DAY_MS,
    async detect(db, now, settings, orgs) {
      const day = new Date(floorToDay(now).getTime() - DAY_MS);
      const days = await providerCostDays(db, day, orgs);
      const served = await servedModelKeys(db, new Date(now.getTime() - DAY_MS), now, orgs);
      if (days.length === 0 && served.length === 0) return [];
      const catalog = await settings.catalog();
      const prices = new Map<string, PriceEntry[]>();
      const pricesOf = async (orgId: string) => {
        if (!prices.has(orgId)) prices.set(orgId, await orgPrices(db, orgId));
        return prices.get(orgId)!;
      };
      const found: Detection[] = [];
      const seen: Array<() => Promise<void>> = [];
      // A model's effective price (catalogue or custom rate) against the one seen before.
      for (const key of served) {
        if (!isProviderKind(key.provider)) continue;
        const price = resolvedPrice({ kind: key.provider, upstreamModel: key.model, modelId: key.model, prices: await pricesOf(key.orgId), catalog });
        const perMillion = (input: number, output: number) => costAt(price, input, 0, output)?.cost ?? null;
        const current = { input: perMillion(1e6, 0), output: perMillion(0, 1e6) };
        const previous = await readPriceSnapshot(db, key);
        seen.push(() => writePriceSnapshot(db, key, current, now));
        const changed = previous && detectPriceChange({ orgId: key.orgId, model: key.model, day: floorToDay(now), previous, current });
        if (changed) found.push(changed);
      }
      for (const d of days) {
        const rates = await pricesOf(d.orgId);
        // Our own estimate of the same requests, as if the provider had reported nothing.
        const usage = { prompt_tokens: d.promptTokens, completion_tokens: d.completionTokens, total_tokens: d.promptTokens + d.completionTokens, prompt_tokens_details: { cached_tokens: d.cachedTokens } };
        const estimate = isProviderKind(d.provider) ? estimateCost({ usage, kind: d.provider, upstreamModel: d.model, modelId: d.model, prices: rates, catalog }) : null;
        // Without an estimate of our own there is nothing to drift from (unpriced traffic is its own finding).
        if (!estimate) continue;
        const detection = detectCostDrift({ orgId: d.orgId, model: d.model, day, requests: d.requests, reported: d.reported, estimated: estimate.cost });
        if (detection) found.push(detection);
      }
      // The prices seen are kept only after this run's findings are: a run that fails between
      // the two is retried and still sees the change.
      return { detections: found, afterRecorded: async () => { for (const write of seen) await write(); } };
    },
  },
  {
    name: 'unpriced-traffic',
    types: ['unpriced.traffic'],
    windowMs: () => HOUR_MS,
    async detect(db, now, _settings, orgs) {
      // "In the last hour" is the 60 minutes up to now, so unpriced traffic is told within one scan.
      return (await unpricedModels(db, new Date(now.getTime() - HOUR_MS), now, orgs)).map(detectUnpricedTraffic).filter((d): d is Detection => d !== null);
    },
  },
  {
    name: 'budget-crossings',
    types: ['budget.threshold_crossed'],
    // A crossing is an event: each becomes one finding, opened (and notified) once, whatever ran
    // or was down in between; it resolves once runs stop seeing it, the next one.
    windowMs: (settings) => 2 * settings.everyMs,
    async detect(db, now, _settings, orgs) {
      const crossings = (await recentCrossings(db, new Date(now.getTime() - CROSSING_LOOKBACK_MS), orgs)).map(detectThresholdCrossed);
      const known = await knownFingerprints(db, 'budget.threshold_crossed', [...new Set(crossings.map((c) => c.orgId))]);
      return crossings.filter((c) => !known.has(`${c.orgId}|${fingerprintOf(c)}`));
    },
  },
  {
    name: 'connection-failing',
    types: ['connection.failing'],
    windowMs: () => 5 * MINUTE_MS,
    async detect(db, now, _settings, orgs) {
      return (await connectionWindows(db, new Date(now.getTime() - 5 * MINUTE_MS), now, orgs)).map(detectConnectionFailing).filter((d): d is Detection => d !== null);
    },
  },
  {
    name: 'traffic-regression',
    types: ['traffic.regression'],
    windowMs: () => HOUR_MS,
    async detect(db, now, _settings, orgs) {
      return (await latencyWindows(db, new Date(now.getTime() - HOUR_MS), now, orgs)).map(detectRegression).filter((d): d is Detection => d !== null);
    },
  },
  {
    name: 'model-changed',
    types: ['traffic.model_changed'],
    windowMs: () => HOUR_MS,
    async detect(db, now, _settings, orgs) {
      const from = new Date(now.getTime() - HOUR_MS);
      const changed = (await servedModels(db, from, now, orgs)).flatMap(detectModelChanged);
      const mismatched = (await answeredMismatches(db, from, now, orgs)).map(detectAnsweredMismatch).filter((d): d is Detection => d !== null);
      return [...changed, ...mismatched];
    },
  },
];

/** Crossings are looked for this far back: longer than any budget window, so an outage cannot lose one. */
const CROSSING_LOOKBACK_MS = 35 * DAY_MS;

/** Most of a wider scope's excess, for a narrower scope's anomaly to stand for it. */
const EXPLAINS_SHARE = 0.8;

/**
 * One spike, one finding: the same surge shows in its key, the key's project and the
 * organization. A wider scope's anomaly is dropped when a narrower one inside it carries most of
 * its excess; it stays when the surge is spread (many keys, each too small to fire). A key's
 * anomaly names its project in `evidence.project_id`, so a rule scoped to the project takes it in.
 */
export function narrowestSpendAnomalies(found: Detection[], projectOfKey: ReadonlyMap<string, string>): Detection[] {
  const excess = (d: Detection) => Number(d.evidence.excess ?? 0);
  const parentOf = (d: Detection): string | null => {
    if (d.scope.kind === 'key') return `project:${projectOfKey.get(d.scope.id) ?? ''}`;
    if (d.scope.kind === 'project') return `organization:${d.orgId}`;
    return null;
  };
  const explained = new Set<string>();
  for (const d of found) {
    const parent = parentOf(d);
    const wider = parent && found.find((w) => w.orgId === d.orgId && `${w.scope.kind}:${w.scope.id}` === parent);
    if (wider && excess(d) >= EXPLAINS_SHARE * excess(wider)) explained.add(`${d.orgId}|${parent}`);
  }
  return found
    .filter((d) => !explained.has(`${d.orgId}|${d.scope.kind}:${d.scope.id}`))
    .map((d) => (d.scope.kind === 'key' ? Object.assign(d, { evidence: Object.assign({ project_id: projectOfKey.get(d.scope.id) ?? null }, d.evidence) }) : d));
}

export function detectorNamed(name: string): Detector {
  const detector = DETECTORS.find((d) => d.name === name);
  if (!detector) throw new Error(`no detector named ${name}`);
  return detector;
}

export type ScanResult = { detections: number; opened: number; raised: number; resolved: number; deliveries: QueuedDelivery[] };

/**
 * One detector's run over a page of organizations (every one when `orgs` is absent): records
 * each detection as a finding (opening, updating or raising it, and queueing the notifications
 * of the opened and raised), then resolves the page's findings that stayed clear for a whole
 * window. Safe to run again: a repeated detection updates, it never re-opens. `progress` is
 * called after each detection recorded (the activity heartbeats there).
 */
export async function runDetector(db: Executor, detector: Detector, now: Date, settings: ScanSettings, notify: NotifyOptions, orgs?: OrgPage, progress?: (recorded: number) => void): Promise<ScanResult> {
  const result: ScanResult = { detections: 0, opened: 0, raised: 0, resolved: 0, deliveries: [] };
  const run = await detector.detect(db, now, settings, orgs);
  const detections = Array.isArray(run) ? run : run.detections;
  for (const detection of detections) {
    const change = await recordDetection(db, detection, now, notify);
    result.detections++;
    if (change.change === 'opened') result.opened++;
    if (change.change === 'raised') result.raised++;
    result.deliveries.push(...change.deliveries);
    progress?.(result.detections);
  }
  if (!Array.isArray(run)) await run.afterRecorded();
  const clearSince = new Date(now.getTime() - detector.windowMs(settings));
  result.resolved = (await resolveCleared(db, detector.types, clearSince, now, orgs)).length;
  return result;
}
