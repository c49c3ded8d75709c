import type { Executor } from '../db/client';
import type { JobRow } from '../jobs/job-store';
import { allocate, loadRuleHistory, type Allocation } from './rule-history';

/**
 * A video job's cost-center allocation (issue 23), taken as it ends: by the rules in force when
 * the job was accepted (its `created_at`), matched on the provider that ran it and the model as
 * the client named it (for a route, the route's target that ran, with the route's slug as
 * `route`). Jobs carry no end user or tags.
 */
export async function allocateJob(db: Executor, job: JobRow, cost: number | null): Promise<Allocation> {
  const history = await loadRuleHistory(db, job.orgId, job.createdAt);
  return allocate(history, {
    projectId: job.projectId, keyId: job.keyId, model: job.model, provider: job.provider, route: job.routeSlug, userId: null, tags: {},
  }, cost, job.createdAt.getTime());
}

/** The job columns an allocation fills. */
export function allocationColumns(allocation: Allocation): Pick<JobRow, 'costRuleId' | 'costRuleVersionId' | 'costAllocation'> {
  return { costRuleId: allocation.ruleId, costRuleVersionId: allocation.versionId, costAllocation: allocation.shares };
}
