import { ActivityFailure, continueAsNew, log, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { FindingsActivities, FindingsPageResult } from '../activities/findings';
import type { WalkActivities } from '../activities/walks';
import { FINDINGS_ORG_PAGE_SIZE, infraRetryPolicy, WALK_KEEPS_PLACE, type FindingsScanInput, type FindingsScanResult } from './definitions';

// A run reads rollups and writes findings; a retry updates what the first try recorded.
const { runFindingDetector } = proxyActivities<FindingsActivities>({
  startToCloseTimeout: '4 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 3 },
});
const { listOrganizationPage } = proxyActivities<FindingsActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});
// One page of organizations: it heartbeats as it records, so a lost worker is retried within a
// minute; a page that fails every attempt is counted and the run goes on to the next page.
const { runFindingDetectorPage } = proxyActivities<FindingsActivities>({
  startToCloseTimeout: '4 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 3 },
});

const { endWalk } = proxyActivities<WalkActivities>({ startToCloseTimeout: '1 minute', retry: infraRetryPolicy() });

/** Runs started before issue 34 make one activity over every organization; new runs page through them. */
export const FINDINGS_PAGE_BY_ORGANIZATION = 'findings-page-by-organization';

const COUNTS = ['detections', 'opened', 'raised', 'resolved', 'notified'] as const;

/**
 * One run of one detector (started by its `gw-findings-<detector>` schedule): findings recorded,
 * raised, resolved, and notifications started, one activity per page of organizations in id
 * order, all judged at the run's time. One tenant whose page fails (too much data for the
 * timeout, a row that breaks a detector) fails that page only; the run reports it in
 * `failedPages`. The run continues as new with its cursor before its history grows long.
 */
export async function findingsScan(input: FindingsScanInput): Promise<FindingsScanResult> {
  if (!patched(FINDINGS_PAGE_BY_ORGANIZATION)) return runFindingDetector(input);
  // A run that timed out mid-walk left its place; the next one goes on from it (issue 55).
  const walk = patched(WALK_KEEPS_PLACE) ? `${workflowInfo().taskQueue}:findings:${input.detector}` : null;
  let resume = walk !== null && !input.resume;
  const limit = input.orgPageSize ?? FINDINGS_ORG_PAGE_SIZE;
  const totals: Required<FindingsScanResult> = { detections: 0, opened: 0, raised: 0, resolved: 0, notified: 0, pages: 0, failedPages: 0, ...input.resume?.counts };
  let at = input.resume?.at;
  let afterOrgId = input.resume?.afterOrgId ?? null;
  for (;;) {
    const page = await listOrganizationPage({ afterOrgId, limit, ...(walk !== null && { walk: { walk, resume } }) });
    resume = false;
    at ??= page.at;
    if (page.orgIds.length === 0) break;
    try {
      const found: FindingsPageResult = await runFindingDetectorPage({ detector: input.detector, at, orgIds: page.orgIds });
      for (const count of COUNTS) totals[count] += found[count];
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      totals.failedPages++;
      log.warn('a page of organizations failed; the run goes on', { detector: input.detector, firstOrgId: page.orgIds[0], lastOrgId: page.orgIds.at(-1), error: err.cause?.message ?? err.message });
    }
    totals.pages++;
    afterOrgId = page.orgIds.at(-1)!;
    if (page.orgIds.length < limit) break;
    if (workflowInfo().continueAsNewSuggested) {
      return continueAsNew<typeof findingsScan>({ detector: input.detector, orgPageSize: input.orgPageSize, resume: { at, afterOrgId, counts: totals } });
    }
  }
  if (walk !== null) await endWalk({ walk });
  return totals;
}
