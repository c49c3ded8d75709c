import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { NewJobRecord } from '../core/jobs/job-store';

/**
 * Names shared by workflows, workers, the API and the launcher: task queues, search attributes,
 * workflow ids. Deterministic constants only; workflows import this file.
 */
export const TASK_QUEUES = {
  jobs: 'gw-jobs',
  webhooks: 'gw-webhooks',
  maintenance: 'gw-maintenance',
} as const;
export type TaskQueueName = keyof typeof TASK_QUEUES;

/** A deployment (or a test file) may prefix its queues to share one namespace with others. */
export function taskQueue(name: TaskQueueName, prefix = ''): string {
  return `${prefix}${TASK_QUEUES[name]}`;
}

/**
 * The jobs worker's second queue, of activities only: a finished render's copy to storage runs
 * here, on slots of its own, so long downloads never hold the slots status checks and submits
 * need (issue 34). Served by every jobs worker alongside the jobs queue.
 */
export function downloadsQueue(jobsQueue: string): string {
  return `${jobsQueue}-downloads`;
}

/**
 * Search attributes our workflows set, so an operator can filter in the Temporal UI. The dev
 * launcher registers them when it starts the dev server; production registers them once with
 * `temporal operator search-attribute create`.
 */
export const SEARCH_ATTRIBUTES = {
  GwOrgId: 'Keyword',
  GwKeyId: 'Keyword',
  GwJobStatus: 'Keyword',
  GwModel: 'Keyword',
  GwEndpointId: 'Keyword',
  GwDeliveryStatus: 'Keyword',
} as const;

/** Workflow ids are business ids: one rotation per key, one retirement schedule per endpoint. */
export const searchAttributeKeys = {
  orgId: defineSearchAttributeKey('GwOrgId', SearchAttributeType.KEYWORD),
  keyId: defineSearchAttributeKey('GwKeyId', SearchAttributeType.KEYWORD),
  jobStatus: defineSearchAttributeKey('GwJobStatus', SearchAttributeType.KEYWORD),
  model: defineSearchAttributeKey('GwModel', SearchAttributeType.KEYWORD),
  /** A webhook delivery's endpoint id, or `request` for a job's per-request URL. */
  endpointId: defineSearchAttributeKey('GwEndpointId', SearchAttributeType.KEYWORD),
  deliveryStatus: defineSearchAttributeKey('GwDeliveryStatus', SearchAttributeType.KEYWORD),
};

export const workflowIds = {
  probe: (runId: string) => `probe_${runId}`,
  keyRotation: (oldKeyId: string) => `keyrot_${oldKeyId}`,
  secretRotation: (endpointId: string) => `whsecrot_${endpointId}`,
  /** A job's workflow id is the job id itself (`job_...`). */
  videoJob: (jobId: string) => jobId,
  /** A delivery's workflow id is the delivery id itself (`whd_<event id>`). */
  webhookDelivery: (deliveryId: string) => deliveryId,
  /** A batch's workflow id is the batch id itself (`batch_...`, `msgbatch_...`). */
  batchRun: (batchId: string) => batchId,
};

/**
 * Temporal Schedules on the maintenance queue. Their ids are business ids, prefixed like the
 * task queues so that deployments (or test files) sharing a namespace keep their own.
 */
export const scheduleIds = {
  requestLogRetention: (prefix = '') => `${prefix}gw-request-log-retention`,
  mcpToolSync: (prefix = '') => `${prefix}gw-mcp-tool-sync`,
  webhookDeliverySweep: (prefix = '') => `${prefix}gw-webhook-delivery-sweep`,
  /** One per detector (issue 22): `gw-findings-spend-anomaly`, ... */
  findingsScan: (detector: string, prefix = '') => `${prefix}gw-findings-${detector}`,
};

/** Every detector runs this often (times GW_SCHEDULE_SCALE); issue 22. */
export const FINDINGS_SCAN_EVERY_MS = 300_000;

/** What a `findingsScan` run is told, and what it reports (visible in the Temporal UI). */
export type FindingsScanInput = {
  detector: string;
  /** Organizations per page (one activity each); FINDINGS_ORG_PAGE_SIZE when absent. */
  orgPageSize?: number;
  /** Where a run continued as new goes on: the run's time, the last organization done, the counts so far. */
  resume?: { at: string; afterOrgId: string; counts: FindingsScanResult };
};
/** `pages` and `failedPages` are absent from runs started before issue 34 (one activity over every organization). */
export type FindingsScanResult = { detections: number; opened: number; raised: number; resolved: number; notified: number; pages?: number; failedPages?: number };
/** A detector's run looks at this many organizations per activity. */
export const FINDINGS_ORG_PAGE_SIZE = 200;

/**
 * Scheduled walks started after issue 55 keep their place across runs (core/walk-cursors.ts):
 * a run that times out mid-walk no longer sends the next run back to the first page.
 */
export const WALK_KEEPS_PLACE = 'walk-keeps-place';

/** Every active tool-gateway server is re-listed this often (times GW_SCHEDULE_SCALE); issue 15. */
export const MCP_TOOL_SYNC_EVERY_MS = 900_000;
/** Servers read per page of the sync's walk; each page's servers are listed side by side. */
export const MCP_TOOL_SYNC_PAGE_SIZE = 20;
/** A sync run continues as new (with its cursor) once its history holds this many events. */
export const MCP_TOOL_SYNC_HISTORY_EVENTS = 2_000;

export type McpToolSyncResult = { servers: number; synced: number; failed: number; skipped: number; toolsChanged: number; alertsQueued: number };

/** The delivery sweep (deliveries whose workflow was never started) runs this often (times GW_SCHEDULE_SCALE); issue 20. */
export const WEBHOOK_SWEEP_EVERY_MS = 300_000;
/** Deliveries looked at per page of the sweep; each page's workflows are started side by side. */
export const WEBHOOK_SWEEP_PAGE_SIZE = 100;
/** Pages in one run; a larger backlog is finished by the next runs. */
export const WEBHOOK_SWEEP_MAX_PAGES = 50;

/** `pruned`: settled deliveries deleted (runs started before issue 34 prune nothing and leave it out). */
export type WebhookSweepResult = { checked: number; started: number; finished: boolean; pruned?: number; orphanedJobsEnded?: number };

/** The request log's retention runs this often (times GW_SCHEDULE_SCALE). */
export const REQUEST_LOG_RETENTION_EVERY_MS = 3_600_000;
/** Body-clearing calls in one run (each about 2 minutes at most): a bigger backlog waits for the next run. */
export const REQUEST_LOG_RETENTION_MAX_CLEAR_CALLS = 20;

/** Deletion calls in one run for each kind of expired file (media files, video outputs), each about 2 minutes at most, likewise. */
export const REQUEST_LOG_RETENTION_MAX_MEDIA_CALLS = 10;

export type RequestLogRetentionResult = { partitionsCreated: string[]; partitionsDropped: string[]; bodiesCleared: number; mediaFilesDeleted: number; jobOutputsDeleted?: number; finished: boolean };

/** The Update that cancels a job; the workflow answers it once the job is terminal (runs before the cancel signal). */
export const JOB_CANCEL_UPDATE = 'cancel';
/**
 * The signal the API sends after recording a cancel in Postgres: a signal is taken by the server
 * without a worker, so `POST /v1/jobs/{id}/cancel` answers at once whether or not one polls.
 */
export const JOB_CANCEL_SIGNAL = 'cancel-recorded';

/** `awaitRender`'s final failure: the schedule's checks are spent without a final answer. */
export const STATUS_CHECKS_EXHAUSTED = 'StatusChecksExhausted';
/**
 * How a workflow's activities retry after our own errors (Postgres away, a worker lost, a rolling
 * deploy): their own backoff, without a limit (issue 55). Only a provider's or a receiver's
 * answer spends an attempt of the spec's schedules, and those are counted in Postgres
 * (`jobs.status_checks`, `webhook_deliveries.attempts`), not by the retry policy. A run's input
 * carries it scaled by GW_SCHEDULE_SCALE; runs started without it use these.
 */
export type InfraRetry = { initialMs: number; maximumMs: number };
export const INFRA_RETRY: InfraRetry = { initialMs: 1_000, maximumMs: 60_000 };

/** INFRA_RETRY scaled (tests compress it with the schedules), never under 10 ms. */
export function scaledInfraRetry(scale: number): InfraRetry {
  const initialMs = Math.max(10, Math.round(INFRA_RETRY.initialMs * scale));
  return { initialMs, maximumMs: Math.max(initialMs, Math.round(INFRA_RETRY.maximumMs * scale)) };
}

/** The retry policy of an activity whose failures are ours: unlimited attempts, backing off. */
export function infraRetryPolicy(retry: InfraRetry = INFRA_RETRY) {
  return { initialInterval: retry.initialMs, maximumInterval: retry.maximumMs, backoffCoefficient: 2 };
}
export type JobCancelResult = { status: string };
/**
 * How long a job's record-keeping activity (its row written, ended, its output expired) may
 * take: a few statements and a workflow start. The limit is what a lost attempt costs: a worker
 * killed mid-call, or a completion the server never took (a history process restarting), is
 * retried only when it passes, and a job stalled five minutes on a 10 ms write is a stall.
 */
export const RECORD_ACTIVITY_TIMEOUT = '30 seconds';
/** Attempts of the copy of a finished render to storage: a download the provider keeps failing ends the job. */
export const COMPLETE_VIDEO_ATTEMPTS = 20;

/** One place a render may be submitted, in failover order. */
export type VideoCandidate = { connectionId: string; kind: string; upstreamModel: string; modelId: string; position: string };

export type { NewJobRecord };

export type VideoJobInput = {
  jobId: string;
  orgId: string;
  job: NewJobRecord;
  candidates: VideoCandidate[];
  /** Per failure kind: retry the same candidate, fail over to the next, or stop submitting. */
  failover: Record<string, 'retry' | 'failover' | 'stop'>;
  maxRetries: number;
  /** The wait before each status check (its length is the number of checks). */
  checkIntervalsMs: number[];
  /** How long the output is kept after completion. */
  retentionMs: number;
  /** Retries after our own errors (absent from runs started before issue 55: INFRA_RETRY). */
  retryMs?: InfraRetry;
  /** How long a run whose start the API refused waits for a retry (REFUSED_START_GRACE_MS when absent; tests set it). */
  refusedStartGraceMs?: number;
};

/**
 * How long a rotation's workflow waits, once, for the rotation's transaction to commit: it is
 * started just before that transaction, which normally commits within milliseconds.
 */
export const ROTATION_COMMIT_GRACE_MS = 30_000;

/** The old key stops working at `revokeAt` (ISO 8601): the end of the rotation overlap. */
export type KeyRotationInput = { orgId: string; oldKeyId: string; revokeAt: string };

/** Retired signing secrets of the endpoint stop signing from `retireAt` (ISO 8601) on. */
export type SecretRotationInput = { orgId: string; endpointId: string; retireAt: string };

/** One event to one receiver; the waits before each attempt are input, so tests compress them. */
export type WebhookDeliveryInput = {
  deliveryId: string; orgId: string; endpointId: string | null; attemptDelaysMs: number[];
  /** Retries after our own errors (absent from runs started before issue 55: INFRA_RETRY). */
  retryMs?: InfraRetry;
};

/** An attempt may run this long: the receiver's 10 s answer limit, plus signing and recording. */
export const WEBHOOK_ATTEMPT_TIMEOUT_MS = 15_000;

/** The API recorded a batch's cancel in Postgres; the run stops taking items at its next chunk. */
export const BATCH_CANCEL_SIGNAL = 'cancelBatch';

/** Items one `runBatchChunk` activity takes: a retry after a lost worker re-reads at most this many lines. */
export const BATCH_CHUNK_ITEMS = 100;
/** Chunks one run goes through before it continues as new: its history stays near 600 events. */
export const BATCH_CHUNKS_PER_RUN = 100;
/** Items of a chunk in flight at once, by default (each one chat call through the gateway's own path). */
export const BATCH_ITEM_CONCURRENCY = 8;

/** One batch (issue 56): its items are validated, run chunk by chunk, and written to its output files. */
export type BatchRunInput = {
  batchId: string;
  orgId: string;
  /** Items in flight at once within a chunk. */
  concurrency: number;
  chunksPerRun: number;
  retryMs?: InfraRetry;
  /** Set by Continue-As-New: the validated input's chunk count, and where this run starts. */
  resume?: { chunks: number; nextChunk: number };
  /** Between status checks of a batch a provider runs (NATIVE_BATCH_CHECK_MS, scaled); absent: the constant. */
  nativeCheckMs?: number;
};

/**
 * Between status checks of a provider's batch (issue 56): it runs for minutes to hours, and a
 * check a minute finds its end soon enough while costing the provider's API nothing worth noting.
 */
export const NATIVE_BATCH_CHECK_MS = 60_000;

/** How a chunk's activity ended: every item recorded, or stopped early and why. */
export type BatchChunkResult = { stopped: null } | { stopped: 'cancelled' | 'expired' } | { stopped: 'budget'; refusal: BatchRefusal };

/** The answer an item got when a spend limit had no room (402, its body in the batch's wire): every item not run ends with it. */
export type BatchRefusal = { statusCode: number; body: unknown };

/** How the batch ends, as its finalize step writes it. */
export type BatchEnding = { status: 'completed' | 'cancelled' | 'expired'; unrun?: BatchRefusal };
