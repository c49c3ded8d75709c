import { patched, proxyActivities } from '@temporalio/workflow';
import type { JobSweepActivities } from '../activities/job-sweep';
import type { SweepPage, WebhookSweepActivities } from '../activities/webhook-sweep';
import { WEBHOOK_SWEEP_MAX_PAGES, WEBHOOK_SWEEP_PAGE_SIZE, type WebhookSweepResult } from './definitions';

// A page is one query and at most a page of workflow starts, each idempotent: safe to retry.
// The prune is one bounded delete, safe to repeat.
const { sweepOverdueDeliveries, sweepUnstartedDeliveries, pruneSettledDeliveries } = proxyActivities<WebhookSweepActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

/**
 * Runs started before issue 34 sweep unattempted deliveries under the activity's old name and
 * prune nothing; new runs sweep every overdue pending delivery, then prune settled ones.
 */
export const SWEEP_OVERDUE_AND_PRUNE = 'sweep-overdue-and-prune';

/** Runs started after issue 55 also end jobs whose workflow no longer runs (activities/job-sweep.ts). */
export const SWEEP_ORPHANED_JOBS = 'sweep-orphaned-jobs';

// Each job is ended at most once (the first terminal write wins): safe to retry.
const { endOrphanedJobs } = proxyActivities<JobSweepActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', backoffCoefficient: 2, maximumAttempts: 5 },
});

/**
 * One run of the delivery sweep (started by the `gw-webhook-delivery-sweep` schedule): walks the
 * pending deliveries whose next step is overdue in id order, a page at a time, starts their
 * workflows, then prunes settled deliveries that have left the delivery log.
 */
export async function webhookDeliverySweep(): Promise<WebhookSweepResult> {
  const current = patched(SWEEP_OVERDUE_AND_PRUNE);
  const sweepPage = current ? sweepOverdueDeliveries : sweepUnstartedDeliveries;
  const result: WebhookSweepResult = { checked: 0, started: 0, finished: false };
  let afterId: string | null = null;
  for (let page = 0; page < WEBHOOK_SWEEP_MAX_PAGES && !result.finished; page++) {
    const step: SweepPage = await sweepPage({ afterId, limit: WEBHOOK_SWEEP_PAGE_SIZE });
    result.checked += step.checked;
    result.started += step.started;
    result.finished = step.done;
    afterId = step.afterId;
  }
  if (current) result.pruned = (await pruneSettledDeliveries()).pruned;
  if (patched(SWEEP_ORPHANED_JOBS)) result.orphanedJobsEnded = (await endOrphanedJobs()).ended;
  return result;
}
