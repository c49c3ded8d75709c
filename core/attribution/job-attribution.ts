import type { Executor } from '../db/client';
import type { JobRow } from '../jobs/job-store';
import { allocate, loadRuleHistory, type Allocation } from './rule-history';

/**
 * A video job's cost-center allocation (issue 23), taken as it ends: by the rules in force when
 * the job was accepted (its `created_at`), matched as a chat request is: `model` on the model as
 * the client named it, which for a route is the route's slug (also `route`), and `provider` on
 * the provider that ran it. Jobs carry no end user or tags.
 */
export async function allocateJob(db: Executor, job: JobRow, cost: number | null): Promise<Allocation> {
  const history = await loadRuleHistory(db, job.orgId, job.createdAt);
  return allocate(history, {
    projectId: job.projectId, keyId: job.keyId, model: job.routeSlug ?? job.model, provider: job.provider, route: job.routeSlug, userId: null, tags: {},
  }, cost, job.createdAt.getTime());
}

/** The job columns an allocation fills. */
export function allocationColumns(allocation: Allocation): Pick<JobRow, 'costRuleId' | 'costRuleVersionId' | 'costAllocation'> {
  return { costRuleId: allocation.ruleId, costRuleVersionId: allocation.versionId, costAllocation: allocation.shares };
}
