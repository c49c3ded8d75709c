import { and, eq, sql } from 'drizzle-orm';
import { jobUsageRollup } from '../request-log/usage-rollup';
import { closeJobSpend, type JobSpendOutcome } from '../spend/job-spend';
import type { Database } from '../db/client';
import { JOB_STATUSES, jobEvents, jobs, TERMINAL_JOB_STATUSES, type JobStatus } from '../db/schema';
import { GatewayError } from '../errors';
import { newId } from '../ids';
import { jobEventReceivers, pendingJobDeliveries, queueEvents, type QueuedDelivery } from '../webhooks/fan-out';
import type { LinkSigner } from './output-links';
import { presentJob } from './present';

export type JobRow = typeof jobs.$inferSelect;

/** The job as first recorded: the API writes it, and the workflow writes it again if the API could not. */
export type NewJobRecord = {
  id: string;
  orgId: string;
  keyId: string;
  lineageId: string;
  projectId: string;
  type: string;
  model: string;
  routeSlug: string | null;
  request: Record<string, unknown>;
  webhook: { url: string; events: string[] } | null;
  createdAt: string;
};

/** The jobs row for a new job; inserting it twice is harmless (on conflict, nothing). */
export function jobRowOf(job: NewJobRecord): typeof jobs.$inferInsert {
  return { ...job, status: 'queued', createdAt: new Date(job.createdAt), updatedAt: new Date(job.createdAt) };
}
export type JobLinks = { signer: LinkSigner; baseUrl: string };

/** A job list's `status` filter (given once or repeated); an unknown status is 400 naming it. */
export function jobStatusFilter(value: string | string[] | undefined): JobStatus[] {
  const statuses = ([] as string[]).concat(value ?? []);
  const unknown = statuses.find((s) => !(JOB_STATUSES as readonly string[]).includes(s));
  if (unknown) throw new GatewayError('invalid_request', `Invalid \`status\`: \`${unknown}\` is not one of ${JOB_STATUSES.join(', ')}.`);
  return statuses as JobStatus[];
}

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL_JOB_STATUSES.includes(status);
}

/**
 * Whether the provider may bill a job that did not succeed here: a render it accepted (or may
 * have) whose end the gateway did not see. Canceled once running; out of status checks, or a
 * submit whose answer was lost (both `request_timeout`); ended by an activity that gave up after
 * the provider took the render. A render the provider failed, or a job no provider took, is not
 * billed. (Issue 54, items 7 and 8; docs/decisions.md.)
 */
function providerMayBill(row: JobRow): boolean {
  // A submit sent whose answer was never recorded (issue 55) may have started a render too.
  const taken = row.providerJobId !== null || row.submitIntent !== null;
  if (row.status === 'canceled') return taken;
  if (row.status !== 'failed') return false;
  return row.error?.type === 'request_timeout' || (taken && row.error?.type === 'internal_error');
}

/**
 * Success settles the reservation at the actual cost. A job the provider may bill settles at
 * what was reserved for it (`held`: the render's worst case), although the job itself shows no
 * cost (spec 8: a canceled or failed job carries none): the ledger and the limits count what the
 * provider bills. Any other failure, or a cancel before any render started, releases it.
 */
function spendOutcome(row: JobRow): JobSpendOutcome {
  // The model that rendered: for a route, its target that ran (the job row's model).
  if (row.status === 'succeeded') return { cost: row.usage?.cost ?? null, provider: row.provider, model: row.model };
  return providerMayBill(row) ? { held: true, provider: row.provider, model: row.model } : 'released';
}

const EVENT_OF: Partial<Record<JobStatus, string>> = { succeeded: 'job.succeeded', failed: 'job.failed', canceled: 'job.canceled' };

/**
 * Moves a job to a terminal status in one transaction with its event and the event's
 * deliveries (spec 6.1): only from a non-terminal status, so a retried activity or a lost race
 * changes nothing. Answers the row as it now is, whether this call made the move, and the
 * job's deliveries still pending, which the caller starts once this has committed.
 */
export async function finishJob(db: Database, jobId: string, status: JobStatus, changes: Partial<JobRow>, now: Date, links: JobLinks): Promise<{ row: JobRow; moved: boolean; deliveries: QueuedDelivery[] }> {
  return db.transaction(async (tx) => {
    const [moved] = await tx
      .update(jobs)
      .set({ ...changes, status, completedAt: changes.completedAt ?? now, updatedAt: now })
      .where(and(eq(jobs.id, jobId), sql`${jobs.status} in ('queued', 'running')`))
      .returning();
    if (!moved) {
      const [row] = await tx.select().from(jobs).where(eq(jobs.id, jobId));
      // A retry after a crash between the move and its reply still closes the reservation.
      if (row && isTerminal(row.status)) await closeJobSpend(tx, jobId, spendOutcome(row), now);
      // ...and still answers the deliveries its move queued, for the caller to (re)start.
      return { row: row!, moved: false, deliveries: await pendingJobDeliveries(tx, jobId) };
    }
    await closeJobSpend(tx, jobId, spendOutcome(moved), now);
    // Usage counts the job with the move, once: a retried move finds nothing to move.
    for (const statement of jobUsageRollup(jobId)) await tx.execute(statement);
    const type = EVENT_OF[status]!;
    const data = presentJob(moved, links);
    await tx.insert(jobEvents).values({ id: newId('evt'), orgId: moved.orgId, jobId, type, data, createdAt: now }).onConflictDoNothing();
    // One event per receiving endpoint, each with its own id (spec 6.1), queued in the same
    // transaction as the move: committed together or not at all.
    const deliveries = await queueEvents(tx, { orgId: moved.orgId, type, data, jobId, now }, await jobEventReceivers(tx, moved, type));
    return { row: moved, moved: true, deliveries };
  });
}
