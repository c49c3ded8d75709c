import type { RedisClient } from '../redis';
import { eq } from 'drizzle-orm';
import { allocateJob, allocationColumns } from '../attribution/job-attribution';
import type { Database } from '../db/client';
import { jobs, type JobError } from '../db/schema';
import { endJobHold } from '../spend/job-spend';
import type { QueuedDelivery } from '../webhooks/fan-out';
import { finishJob, type JobLinks, type JobRow } from './job-store';

/** What ending a job needs: the store, the spend Redis its hold is in, and where its events' deliveries start. */
export type EndJobDeps = { db: Database; spendRedis: RedisClient; links: JobLinks; startDeliveries(deliveries: QueuedDelivery[]): Promise<void> };

/**
 * Ends a job `failed` (no cost) or `canceled`, with its event, unless it is terminal already
 * (the first terminal write wins: a cancel that races completion finds it succeeded). The
 * reservation is given back, what the job would have been charged to is recorded (with no
 * cost), its hold ends, and the event's deliveries start. The jobs worker's `endJob` and the
 * API's cancel both end a job here.
 */
export async function endJobUnpaid(deps: EndJobDeps, jobId: string, status: 'failed' | 'canceled', error: JobError | null, now: Date): Promise<{ row: JobRow; moved: boolean }> {
  const [job] = await deps.db.select().from(jobs).where(eq(jobs.id, jobId));
  const allocation = job ? allocationColumns(await allocateJob(deps.db, job, null)) : {};
  const { row, moved, deliveries } = await finishJob(deps.db, jobId, status, { error, usage: null, ...allocation }, now, deps.links);
  await endJobHold(deps.db, deps.spendRedis, jobId);
  await deps.startDeliveries(deliveries);
  return { row, moved };
}
