import { proxyActivities } from '@temporalio/workflow';
import type { FindingsActivities } from '../activities/findings';
import type { FindingsScanInput, FindingsScanResult } from './definitions';

// A run reads rollups and writes findings; a retry updates what the first try recorded.
const { runFindingDetector } = proxyActivities<FindingsActivities>({
  startToCloseTimeout: '4 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 3 },
});

/**
 * One run of one detector (started by its `gw-findings-<detector>` schedule): findings recorded,
 * raised, resolved, and notifications started, in one activity.
 */
export async function findingsScan(input: FindingsScanInput): Promise<FindingsScanResult> {
  return runFindingDetector(input);
}
