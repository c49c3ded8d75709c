import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { sealingWorkerDataConverter } from '../core/crypto/payload-codec';
import { NativeConnection, type Worker } from '@temporalio/worker';
import type { Dispatcher } from 'undici';
import { createKeyRotationActivities } from '../activities/key-rotation';
import { createMcpToolSyncActivities } from '../activities/mcp-tool-sync';
import { createProbeActivities } from '../activities/probe';
import { createRetentionActivities } from '../activities/request-log-retention';
import { createSecretRotationActivities } from '../activities/secret-rotation';
import path from 'node:path';
import { createVideoJobActivities, type VideoJobDeps } from '../activities/video-job';
import { createWebhookDeliveryActivities } from '../activities/webhook-delivery';
import { createDeliveryStarter, type DeliveryStartOptions } from '../activities/webhook-dispatch';
import { createWebhookSweepActivities } from '../activities/webhook-sweep';
import { createMailer, type Mailer } from '../core/notifications/mailer';
import { loadModelCatalog, type ModelCatalog } from '../core/catalog/model-catalog';
import { alertAttemptDelays, webhookAttemptDelays } from '../core/webhooks/schedule';
import { systemClock, type Clock } from '../core/clock';
import { publicBaseUrl, requireSetting, workerSettingsOf, type Config, type WorkerQueue } from '../core/config';
import { createSealer, deriveKeys, type SigningKeys } from '../core/crypto/sealing';
import { createLinkSigner } from '../core/jobs/output-links';
import { createUpstreamAgent } from '../core/providers/upstream';
import { localOutputStorage } from '../core/storage/output-storage';
import type { Database } from '../core/db/client';
import type { RedisHandle } from '../core/redis';
import { checkSpendRedis, connectSpendRedis } from '../core/spend/spend-redis';
import { UNSUBSCRIBE_KEY_PURPOSE } from '../core/notifications/unsubscribe';
import { downloadsQueue, FINDINGS_SCAN_EVERY_MS, scaledInfraRetry, taskQueue, type InfraRetry, type TaskQueueName } from '../workflows/definitions';
import { createFindingsActivities } from '../activities/findings';
import { ANOMALY_DOLLAR_FLOOR, type ScanSettings } from '../core/findings/scan';
import { ensureMaintenanceSchedules } from './schedules';
import { tracingClientInterceptors } from '../api/temporal-client';
import { createJobSweepActivities } from '../activities/job-sweep';
import { createWalkActivities } from '../activities/walks';
import { createBatchActivities, type BatchItemCaller } from '../activities/batch-run';
import { createNativeBatchActivities } from '../activities/native-batch';
import type { NativeBatchServices } from '../api/native-batch-services';
import { createRequestAttribution, type RequestAttribution } from '../core/attribution/request-attribution';
import { startInProcessGateway, type InProcessGateway } from '../api/in-process-gateway';
import { spoolRoot } from '../core/http/multipart';
import { createLogger } from '../core/logger';
import { bundleGatewayWorkflows, createWorker, FAILURE_CONVERTER_PATH, type WorkerSpec } from './temporal';

export type QueueWorkerDeps = {
  connection: NativeConnection;
  namespace: string;
  taskQueuePrefix: string;
  workflowBundle?: WorkerSpec['workflowBundle'];
  services: ActivityServices;
  /** GW_SCHEDULE_SCALE, for the maintenance schedules' intervals. */
  scheduleScale: number;
  /** SPEND_REDIS_URL, when spend counters have a Redis of their own (for the start-up check's message). */
  spendRedisUrl?: string;
  /** Seals payloads with GW_SEALING_KEYS, for the workers and their client alike. */
  dataConverter: DataConverter;
  /** Each queue's worker settings (GW_WORKER_<QUEUE>_*, GW_SHUTDOWN_GRACE_MS). */
  workerSettings: Record<WorkerQueue, WorkerSpec['settings']>;
};

/**
 * The one wiring of queue workers from configuration, for the worker processes and for the
 * launcher alike (the launcher once wired its own and left out the schedule scale, so a scaled
 * `npm start` ran its findings on the real clock over scaled windows and never raised one).
 */
export function queueWorkerDeps(config: Config, connection: NativeConnection, db: Database, redis: RedisHandle, workflowBundle?: WorkerSpec['workflowBundle']): QueueWorkerDeps {
  return {
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueuePrefix: config.GW_TASK_QUEUE_PREFIX,
    services: createActivityServices(config, db, redis),
    scheduleScale: config.GW_SCHEDULE_SCALE,
    spendRedisUrl: config.SPEND_REDIS_URL,
    workflowBundle,
    dataConverter: sealingWorkerDataConverter(requireSetting(config, 'GW_SEALING_KEYS'), FAILURE_CONVERTER_PATH),
    workerSettings: { JOBS: workerSettingsOf(config, 'JOBS'), DOWNLOADS: workerSettingsOf(config, 'DOWNLOADS'), WEBHOOKS: workerSettingsOf(config, 'WEBHOOKS'), MAINTENANCE: workerSettingsOf(config, 'MAINTENANCE') },
  };
}

/** What activities reach: the worker process connects these once and shares them. */
export type ActivityServices = {
  db: Database;
  redis: RedisHandle;
  /** Spend counters (a job's hold ends there): SPEND_REDIS_URL's Redis, else `redis`. */
  spendRedis: RedisHandle;
  clock: Clock;
  video: Omit<VideoJobDeps, 'db' | 'clock' | 'redis' | 'startDeliveries'>;
  /** The detectors' settings (issue 22), and where links in alerts point. */
  findings: ScanSettings;
  publicUrl: string;
  /** Batch items run through the gateway's own application, in this process (started on the first item). */
  batches: LazyGateway & { scratchDir: string; attribution: RequestAttribution };
  /** Webhook receivers are reached through the guarded dispatcher, on the scaled schedule. */
  webhooks: { dispatcher: Dispatcher; mailer: Mailer; attemptDelaysMs: number[]; alertAttemptDelaysMs: number[]; retryMs: InfraRetry; unsubscribeKey: SigningKeys };
};

/**
 * Builds the activity services from configuration and the process's connections: sealing (to
 * open provider credentials), output storage under GW_DATA_DIR, signed links, upstream pools.
 */
export function createActivityServices(config: Config, db: Database, redis: RedisHandle): ActivityServices {
  const keyring = requireSetting(config, 'GW_SEALING_KEYS');
  const sealer = createSealer(keyring);
  // One guarded pool for every outbound call a worker makes: providers and webhook receivers.
  const outbound = createUpstreamAgent({ allowPrivateNetwork: config.GW_ALLOW_PRIVATE_NETWORK });
  let catalog: Promise<ModelCatalog> | undefined;
  return {
    db,
    redis,
    spendRedis: connectSpendRedis(config, redis),
    clock: systemClock,
    findings: {
      anomalyDollarFloor: ANOMALY_DOLLAR_FLOOR,
      everyMs: Math.round(FINDINGS_SCAN_EVERY_MS * config.GW_SCHEDULE_SCALE),
      // Only the maintenance worker's cost-drift runs need it; loaded on the first.
      catalog: () => (catalog ??= loadModelCatalog()),
    },
    publicUrl: publicBaseUrl(config),
    batches: { ...lazyInProcessGateway(config), scratchDir: spoolRoot(config.dataDir), attribution: createRequestAttribution(db) },
    webhooks: {
      dispatcher: outbound,
      mailer: createMailer(config.SMTP_URL, config.SMTP_FROM),
      attemptDelaysMs: webhookAttemptDelays(config.GW_SCHEDULE_SCALE),
      alertAttemptDelaysMs: alertAttemptDelays(config.GW_SCHEDULE_SCALE),
      retryMs: scaledInfraRetry(config.GW_SCHEDULE_SCALE),
      unsubscribeKey: deriveKeys(keyring, UNSUBSCRIBE_KEY_PURPOSE),
    },
    video: {
      sealer,
      storage: localOutputStorage(path.join(config.dataDir, 'outputs')),
      agent: outbound,
      links: { signer: createLinkSigner(deriveKeys(keyring, 'output-links')), baseUrl: publicBaseUrl(config) },
    },
  };
}

type LazyGateway = { callItem: BatchItemCaller; native: NativeBatchServices; close(): Promise<void> };

/**
 * The in-process gateway for batch items, started on the first item a worker runs (a jobs
 * worker that never runs a batch never loads the API's runtime) and stopped with the worker.
 */
function lazyInProcessGateway(config: Config): LazyGateway {
  let gateway: Promise<InProcessGateway> | undefined;
  const started = () => (gateway ??= startInProcessGateway(config, createLogger(config.LOG_LEVEL, 'gw-worker-batches')).catch((err: unknown) => {
    gateway = undefined;
    throw err;
  }));
  return {
    callItem: async (request) => (await started()).callItem(request),
    native: {
      plan: async (input) => (await started()).native.plan(input),
      hold: async (input) => (await started()).native.hold(input),
      price: async (input) => (await started()).native.price(input),
    },
    close: async () => {
      if (gateway) await (await gateway.catch(() => null))?.close();
    },
  };
}

/** Deliveries run on the webhooks queue, job events and alerts each on their own schedule. */
function deliveryOptions(services: ActivityServices, taskQueuePrefix: string): DeliveryStartOptions {
  return { taskQueue: taskQueue('webhooks', taskQueuePrefix), attemptDelaysMs: services.webhooks.attemptDelaysMs, alertAttemptDelaysMs: services.webhooks.alertAttemptDelaysMs, retryMs: services.webhooks.retryMs };
}

/** The activities each task queue's workers serve, built from real dependencies. */
function activitiesFor(name: TaskQueueName, queue: string, services: ActivityServices, temporal: Client, taskQueuePrefix: string): object {
  const probe = createProbeActivities({ taskQueue: queue });
  switch (name) {
    case 'jobs': {
      const startDeliveries = createDeliveryStarter(temporal, deliveryOptions(services, taskQueuePrefix));
      return {
        ...probe, ...createVideoJobActivities({ ...services.video, db: services.db, redis: services.spendRedis, clock: services.clock, startDeliveries }),
        ...createBatchActivities({ db: services.db, storage: services.video.storage, clock: services.clock, callItem: services.batches.callItem, nativePlan: services.batches.native.plan, scratchDir: services.batches.scratchDir, startDeliveries, publicUrl: services.publicUrl }),
        ...createNativeBatchActivities({ db: services.db, storage: services.video.storage, clock: services.clock, sealer: services.video.sealer, agent: services.video.agent, spendRedis: services.spendRedis.redis, native: services.batches.native, attribution: services.batches.attribution, scratchDir: services.batches.scratchDir }),
      };
    }
    case 'webhooks':
      return { ...probe, ...createWebhookDeliveryActivities({ db: services.db, clock: services.clock, sealer: services.video.sealer, dispatcher: services.webhooks.dispatcher, mailer: services.webhooks.mailer, unsubscribe: { publicUrl: services.publicUrl, key: services.webhooks.unsubscribeKey } }) };
    case 'maintenance': {
      // The MCP sync raises alerts and the sweep starts deliveries left unstarted; both run them on the webhooks queue.
      const deliveries = deliveryOptions(services, taskQueuePrefix);
      const startDeliveries = createDeliveryStarter(temporal, deliveries);
      return {
        ...probe, ...createKeyRotationActivities(services), ...createSecretRotationActivities(services), ...createRetentionActivities({ ...services, storage: services.video.storage }),
        ...createMcpToolSyncActivities({ db: services.db, clock: services.clock, sealer: services.video.sealer, dispatcher: services.webhooks.dispatcher, startDeliveries, publicUrl: services.publicUrl }),
        ...createWebhookSweepActivities({ db: services.db, clock: services.clock, temporal, deliveries }),
        ...createJobSweepActivities({ db: services.db, clock: services.clock, temporal, spendRedis: services.spendRedis.redis, links: services.video.links, startDeliveries }),
        ...createFindingsActivities({ db: services.db, clock: services.clock, settings: services.findings, publicUrl: services.publicUrl, startDeliveries }),
        ...createWalkActivities({ db: services.db }),
      };
    }
    default:
      return probe;
  }
}

const SETTINGS_OF: Record<TaskQueueName, WorkerQueue> = { jobs: 'JOBS', webhooks: 'WEBHOOKS', maintenance: 'MAINTENANCE' };

const noop = () => undefined;
/** webpack's build report is noise in a worker's log; failures still throw. */
export const quietBundlerLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: noop, log: noop };

export type RunningWorkers = { workers: Worker[]; done: Promise<void>; shutdown(): Promise<void> };

/** Starts one worker per named queue and keeps them polling until shutdown. */
export async function startQueueWorkers(names: readonly TaskQueueName[], deps: QueueWorkerDeps): Promise<RunningWorkers> {
  // A job worker ends spend holds: not on a Redis that may evict them.
  if (names.includes('jobs')) await checkSpendRedis(deps.services.spendRedis.redis, { SPEND_REDIS_URL: deps.spendRedisUrl });
  // Every queue's worker runs the same workflow code: bundle it once, not once per queue.
  const workflowBundle = deps.workflowBundle ?? (await bundleGatewayWorkflows(quietBundlerLogger));
  // Activities that queue webhook events start their delivery workflows over the worker's own connection.
  const temporal = new Client({ connection: deps.connection, namespace: deps.namespace, dataConverter: deps.dataConverter, interceptors: tracingClientInterceptors() });
  const specs: WorkerSpec[] = names.flatMap((name) => {
    const queue = taskQueue(name, deps.taskQueuePrefix);
    const activities = activitiesFor(name, queue, deps.services, temporal, deps.taskQueuePrefix);
    const base = { connection: deps.connection, namespace: deps.namespace, dataConverter: deps.dataConverter };
    const own: WorkerSpec = { ...base, taskQueue: queue, activities, workflowBundle, settings: deps.workerSettings[SETTINGS_OF[name]] };
    // A jobs worker serves the downloads queue too: the same activities on slots of their own.
    return name === 'jobs' ? [own, { ...base, taskQueue: downloadsQueue(queue), activities, settings: deps.workerSettings.DOWNLOADS }] : [own];
  });
  const workers = await Promise.all(specs.map(createWorker));
  // The maintenance queue's schedules exist once a worker can serve them.
  if (names.includes('maintenance')) await ensureMaintenanceSchedules(temporal, deps.taskQueuePrefix, deps.scheduleScale);
  const done = Promise.all(workers.map((w) => w.run())).then(() => undefined);
  return {
    workers,
    done,
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await done;
      // Batch items' request-log rows and spend settle before the process goes.
      await deps.services.batches.close();
    },
  };
}
