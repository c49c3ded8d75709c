import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { and, asc, inArray, lt } from 'drizzle-orm';
import type { Clock } from '../core/clock';
import { jobs } from '../core/db/schema';
import { endJobUnpaid, type EndJobDeps } from '../core/jobs/end-job';
import { workflowIds } from '../workflows/definitions';

export type JobSweepDeps = EndJobDeps & { clock: Clock; temporal: Client };

/**
 * A job not changed for this long is looked at by the sweep: its workflow is asked whether it
 * still runs. Not scaled, as the delivery sweep's grace is not: it waits out real-time paths
 * (a start's retry, a worker's restart).
 */
export const JOB_SWEEP_GRACE_MS = 15 * 60_000;
/** Jobs looked at per run; a bigger backlog is finished by the next runs. */
export const JOB_SWEEP_LIMIT = 200;

/** What ends a job whose workflow is gone: the customer reads this, the operator its workflow. */
const ORPHANED = { message: 'The job could not be completed because of an error on the gateway\'s side: it stopped being tracked.', type: 'internal_error', code: null };

/**
 * Jobs left queued or running by a workflow that no longer runs (issue 55, item 8): a start
 * lost after its row was written, a run an operator terminated, a run a defect failed. Nothing
 * else would ever end them, and each keeps its reservation held. Each such job ends `failed`
 * with its event; its reservation is settled at its worst case when the provider may be
 * rendering (a submit sent), released otherwise (core/jobs/job-store.ts).
 */
export function createJobSweepActivities(deps: JobSweepDeps) {
  return {
    async endOrphanedJobs(): Promise<{ checked: number; ended: number }> {
      const before = new Date(deps.clock.now().getTime() - JOB_SWEEP_GRACE_MS);
      const candidates = await deps.db.select({ id: jobs.id }).from(jobs)
        .where(and(inArray(jobs.status, ['queued', 'running']), lt(jobs.updatedAt, before)))
        .orderBy(asc(jobs.updatedAt)).limit(JOB_SWEEP_LIMIT);
      let ended = 0;
      for (const { id } of candidates) {
        if (await workflowRuns(deps.temporal, workflowIds.videoJob(id))) continue;
        const { moved } = await endJobUnpaid(deps, id, 'failed', ORPHANED, deps.clock.now());
        if (moved) ended++;
      }
      return { checked: candidates.length, ended };
    },
  };
}

/** Whether the job's workflow is running; an error other than "not found" counts as running (ask again next time). */
async function workflowRuns(temporal: Client, workflowId: string): Promise<boolean> {
  try {
    const { status } = await temporal.workflow.getHandle(workflowId).describe();
    return status.name === 'RUNNING';
  } catch (err) {
    return !(err instanceof WorkflowNotFoundError);
  }
}

export type JobSweepActivities = ReturnType<typeof createJobSweepActivities>;
