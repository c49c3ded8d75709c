import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { detectorNamed, runDetector, type ScanSettings } from '../core/findings/scan';
import type { FindingsScanInput, FindingsScanResult } from '../workflows/definitions';
import type { StartDeliveries } from './webhook-dispatch';

export type FindingsDeps = { db: Database; clock: Clock; settings: ScanSettings; publicUrl: string; startDeliveries: StartDeliveries };

/**
 * The detectors' runs (issue 22): each reads the rollups and the request log, records findings
 * by fingerprint and queues notifications in the same transactions, then starts the queued
 * deliveries once they have committed (a start that fails is left to the delivery sweep).
 */
export function createFindingsActivities(deps: FindingsDeps) {
  return {
    async runFindingDetector(input: FindingsScanInput): Promise<FindingsScanResult> {
      const detector = detectorNamed(input.detector);
      const result = await runDetector(deps.db, detector, deps.clock.now(), deps.settings, { publicUrl: deps.publicUrl });
      await deps.startDeliveries(result.deliveries);
      return { detections: result.detections, opened: result.opened, raised: result.raised, resolved: result.resolved, notified: result.deliveries.length };
    },
  };
}

export type FindingsActivities = ReturnType<typeof createFindingsActivities>;
