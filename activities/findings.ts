import { Context } from '@temporalio/activity';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { detectorNamed, runDetector, type ScanSettings } from '../core/findings/scan';
import { organizationIdsAfter } from '../core/tenancy/organizations';
import { walkPage, type WalkStep } from '../core/walk-cursors';
import type { FindingsScanInput, FindingsScanResult } from '../workflows/definitions';
import type { StartDeliveries } from './webhook-dispatch';

export type FindingsDeps = { db: Database; clock: Clock; settings: ScanSettings; publicUrl: string; startDeliveries: StartDeliveries };

/** What one page of a detector's run reports. */
export type FindingsPageResult = Omit<FindingsScanResult, 'pages' | 'failedPages'>;

/**
 * The detectors' runs (issues 22, 34): each reads the rollups and the request log, records
 * findings by fingerprint and queues notifications in the same transactions, then starts the
 * queued deliveries once they have committed (a start that fails is left to the delivery sweep).
 * A run pages through organizations, one activity per page.
 */
export function createFindingsActivities(deps: FindingsDeps) {
  return {
    /**
     * One page of organization ids after `afterOrgId`, and the time the run judges at (the first
     * page's). With `walk`, the walk keeps its place across runs (core/walk-cursors.ts).
     */
    async listOrganizationPage(input: { afterOrgId: string | null; limit: number; walk?: WalkStep }): Promise<{ orgIds: string[]; at: string }> {
      return { orgIds: await walkPage(deps.db, input.walk, input.afterOrgId, (after) => organizationIdsAfter(deps.db, after, input.limit)), at: deps.clock.now().toISOString() };
    },

    /**
     * One detector over one page of organizations, at the run's time: its detections recorded,
     * its cleared findings resolved, its notifications started. Heartbeats as it records, so a
     * lost worker is noticed in a heartbeat's time, not the whole timeout's; a retry runs the
     * page again (recording is idempotent).
     */
    async runFindingDetectorPage(input: { detector: string; at: string; orgIds: string[] }): Promise<FindingsPageResult> {
      const detector = detectorNamed(input.detector);
      const heartbeat = () => Context.current().heartbeat();
      heartbeat();
      const result = await runDetector(deps.db, detector, new Date(input.at), deps.settings, { publicUrl: deps.publicUrl }, input.orgIds, heartbeat);
      await deps.startDeliveries(result.deliveries);
      return { detections: result.detections, opened: result.opened, raised: result.raised, resolved: result.resolved, notified: result.deliveries.length };
    },

    /** A whole run over every organization in one activity: what runs started before issue 34 call. */
    async runFindingDetector(input: FindingsScanInput): Promise<FindingsScanResult> {
      const detector = detectorNamed(input.detector);
      const result = await runDetector(deps.db, detector, deps.clock.now(), deps.settings, { publicUrl: deps.publicUrl });
      await deps.startDeliveries(result.deliveries);
      return { detections: result.detections, opened: result.opened, raised: result.raised, resolved: result.resolved, notified: result.deliveries.length };
    },
  };
}

export type FindingsActivities = ReturnType<typeof createFindingsActivities>;
