import path from 'node:path';
import { createResponseCacheStore } from '../core/response-cache/store';
import type { Client } from '@temporalio/client';
import { deriveKeys } from '../core/crypto/sealing';
import { createLinkSigner } from '../core/jobs/output-links';
import { OUTPUT_RETENTION_MS } from '../core/jobs/schedule';
import { createMediaFiles } from '../core/media/stored-files';
import { localOutputStorage } from '../core/storage/output-storage';
import { spoolRoot, sweepSpool } from '../core/http/multipart';
import { createAuthFailureLimiter } from '../core/auth/auth-failure-limiter';
import { createKeyResolver } from '../core/auth/gateway-key-auth';
import { subscribeConfigChanges } from '../core/cache/config-changes';
import { systemClock } from '../core/clock';
import { requireSetting, type Config } from '../core/config';
import { connectDatabase } from '../core/db/client';
import type { Logger } from '../core/logger';
import { connectRedis } from '../core/redis';
import { downloadsQueue, taskQueue, TASK_QUEUES, type TaskQueueName } from '../workflows/definitions';
import { sealingDataConverter } from '../core/crypto/payload-codec';
import { connectClient, queueHasPollers, withTemporalDeadline } from './temporal-client';
import type { AppDeps } from './app';
import { createManagementServices } from './manage/services';
import { DEFAULT_UPSTREAM_TIMEOUT_MS, type GatewayServices } from './gateway/services';
import { loadModelCatalog } from '../core/catalog/model-catalog';
import { createLearnedParams } from '../core/chat/prepare';
import { createUpstreamAgent } from '../core/providers/upstream';
import { createGatewayMetrics, observedRequestLog, redisClients, watchConnections, type GatewayMetrics } from '../core/observability/metrics';
import { catalogNames } from '../core/observability/model-labels';
import { createRequestLogWriter, type RequestLogEntry } from '../core/request-log/writer';
import { createRequestAttribution } from '../core/attribution/request-attribution';
import { createBatchWriter, createFlushLane } from '../core/db/batch-writer';
import { createPendingRowJournal, createRowJournal, JOURNAL_RECOVERY_MS } from '../core/db/row-journal';
import { budgetCrossings, spendLedger } from '../core/db/schema';
import { createSpendLedger, createSpendUpkeep } from '../core/spend/ledger';
import { createSpendLeases, leasedSpendLedger } from '../core/spend/leases';
import { createRateLeases } from '../core/ratelimit/rate-leases';
import { resolveEndUserCapIn } from '../core/spend/end-user-caps';
import { createOrgConfigCache } from '../core/routing/org-config';
import { createGuardrailPolicies } from '../core/guardrails/policy-cache';
import type { HealthChecks } from './health';

import { createInFlight } from '../core/in-flight';
import { checkSpendRedis, connectSpendRedis } from '../core/spend/spend-redis';

export type ApiRuntime = {
  deps: AppDeps;
  temporal: Client;
  /** Kept only when an ops port is configured (GW_OPS_PORT): served there by api/server.ts. */
  metrics: GatewayMetrics | null;
  close(): Promise<void>;
};

/** Connects everything the API process needs, from configuration. */
export async function startApiRuntime(config: Config, logger: Logger): Promise<ApiRuntime> {
  const sealingKeys = requireSetting(config, 'GW_SEALING_KEYS');
  const database = connectDatabase(requireSetting(config, 'DATABASE_URL'));
  const redis = connectRedis(requireSetting(config, 'REDIS_URL'), config.REDIS_KEY_PREFIX);
  const spendRedis = connectSpendRedis(config, redis);
  await checkSpendRedis(spendRedis.redis, config, (message) => logger.warn(message));
  // Payloads and failures' messages are sealed with GW_SEALING_KEYS: a job's prompt is not readable in Temporal's history.
  const dataConverter = sealingDataConverter(sealingKeys);
  const payloadCodec = dataConverter.payloadCodecs[0]!;
  const temporal = connectClient(requireSetting(config, 'TEMPORAL_ADDRESS'), config.TEMPORAL_NAMESPACE, dataConverter);
  const keys = createKeyResolver(database.db);
  // Multipart spool directories a crashed process left behind (older than an hour).
  const swept = await sweepSpool(spoolRoot(config.dataDir));
  if (swept > 0) logger.info({ swept }, 'removed leftover multipart spool directories');
  // The one guarded outbound pool: chat, provider downloads and credential checks share it.
  const upstreamAgent = createUpstreamAgent({ allowPrivateNetwork: config.GW_ALLOW_PRIVATE_NETWORK });
  const manage = createManagementServices({ ...config, GW_SEALING_KEYS: sealingKeys }, temporal.client, upstreamAgent);
  // The writers' batches reach Postgres one at a time (core/db/batch-writer.ts, FlushLane).
  const lane = createFlushLane();
  // Queued rows are kept on local disk until Postgres has them: a killed process loses none,
  // and the next process to start here (or any, every JOURNAL_RECOVERY_MS) inserts them.
  const journals = path.join(config.dataDir, 'journal');
  const spendRows = createBatchWriter(database.db, spendLedger, logger, 'spend ledger', {
    lane, journal: createRowJournal(journals, 'spend_ledger'), pendingJournal: createPendingRowJournal(journals, 'spend_ledger_pending'),
  });
  const budgetCrossingRows = createBatchWriter(database.db, budgetCrossings, logger, 'budget crossings', { lane, journal: createRowJournal(journals, 'budget_crossings') });
  // One signer and one store for every output link: video jobs and media files alike.
  const signer = createLinkSigner(deriveKeys(sealingKeys, 'output-links'));
  const storage = localOutputStorage(path.join(config.dataDir, 'outputs'));
  // Cost-center attribution of request-log rows, with their batch (issue 23).
  const attribution = createRequestAttribution(database.db);
  // Without an ops port nothing is counted: the request path pays nothing for metrics.
  const catalog = await loadModelCatalog();
  const metrics = config.GW_OPS_PORT === undefined ? null : createGatewayMetrics('gw-api', catalogNames(catalog));
  const requestLog = createRequestLogWriter(database.db, logger, { attribution, lane, journal: createRowJournal(journals, 'request_logs') });
  const recoverJournals = () => Promise.all([spendRows, budgetCrossingRows, requestLog].map((w) => w.recover()))
    .catch((err: unknown) => logger.warn({ err }, 'could not read the row journals of stopped processes'));
  void recoverJournals();
  const journalRecovery = setInterval(() => void recoverJournals(), JOURNAL_RECOVERY_MS);
  journalRecovery.unref();
  if (metrics) {
    metrics.watchWriter('request_log', requestLog);
    metrics.watchWriter('spend_ledger', spendRows);
    watchConnections(metrics.registry, database.pool, redisClients(redis, spendRedis));
  }
  const spendDeps = { db: database.db, redis: spendRedis, rows: spendRows, crossings: budgetCrossingRows };
  const spendUpkeep = createSpendUpkeep(spendDeps);
  const spendLeases = createSpendLeases({ redis: spendRedis, upkeep: spendUpkeep });
  const rateLeases = createRateLeases({ redis: spendRedis });
  const gateway: GatewayServices = {
    // The metrics label a served model by name when a model map names it (model-labels.ts).
    orgConfig: createOrgConfigCache(database.db, manage.sealer, metrics ? { onLoad: (org) => metrics.learnModelMaps(org.orgId, org.connections) } : {}),
    catalog,
    agent: upstreamAgent,
    learned: createLearnedParams(),
    requestLog: observedRequestLog(requestLog, metrics ? [(row: RequestLogEntry) => metrics.observeRequest(row)] : []),
    defaultTimeoutMs: DEFAULT_UPSTREAM_TIMEOUT_MS,
    jobs: {
      temporal: temporal.client,
      links: { signer, baseUrl: config.GW_PUBLIC_URL ?? null },
      scheduleScale: config.GW_SCHEDULE_SCALE,
      taskQueuePrefix: config.GW_TASK_QUEUE_PREFIX,
      batches: { itemConcurrency: config.GW_BATCH_ITEM_CONCURRENCY, chunkItems: config.GW_BATCH_CHUNK_ITEMS, chunksPerRun: config.GW_BATCH_CHUNKS_PER_RUN },
    },
    storage,
    // Kept as long as a job's output, scaled like every durable wait.
    mediaFiles: createMediaFiles({ db: database.db, storage, signer, clock: systemClock, retentionMs: Math.round(OUTPUT_RETENTION_MS * config.GW_SCHEDULE_SCALE) }),
    redis,
    spendRedis,
    spend: leasedSpendLedger(createSpendLedger(spendDeps, spendUpkeep), spendLeases, { ...spendDeps, rate: rateLeases }),
    endUserCap: (orgConfig, request) => resolveEndUserCapIn(database.db, orgConfig, request),
    spendRows,
    guardrails: createGuardrailPolicies(database.db, {
      // Names and bounds only: the patterns are the tenant's.
      pastBounds: (past) => logger.warn({ org_id: past.orgId, policy: past.policy, reason: past.reason }, 'guardrail policy past the pattern bounds (written before them): its regex rules fail as engine errors until it is patched'),
    }),
    responseCache: createResponseCacheStore(redis.redis),
    spoolDir: spoolRoot(config.dataDir),
    sealer: manage.sealer,
    inFlight: createInFlight(),
  };
  const unsubscribe = await subscribeConfigChanges(redis, ({ orgId, what }) => {
    if (orgId) {
      // A limit may have been lowered: this process's spend and leases in the organization are settled now.
      void spendLeases.flush(orgId).catch(() => undefined);
      keys.clearOrg(orgId);
      gateway.orgConfig.clearOrg(orgId);
      gateway.guardrails.clearOrg(orgId);
      attribution.clearOrg(orgId);
    } else {
      keys.clear();
      gateway.orgConfig.clear();
      gateway.guardrails.clear();
      attribution.clear();
    }
    logger.debug({ what, org_id: orgId }, 'config changed; caches cleared');
  });

  const queues = Object.keys(TASK_QUEUES) as TaskQueueName[];
  const readiness: HealthChecks = {
    ready: [
      { name: 'postgres', check: async () => void (await database.pool.query('SELECT 1')) },
      { name: 'redis', check: async () => void (await redis.redis.ping()) },
    ],
    deep: [
      { name: 'temporal', check: async () => void (await withTemporalDeadline(temporal.client, () => temporal.client.workflowService.getSystemInfo({}))) },
      {
        name: 'workers',
        check: async () => {
          const idle = [];
          for (const name of queues) {
            const queue = taskQueue(name, config.GW_TASK_QUEUE_PREFIX);
            if (!(await withTemporalDeadline(temporal.client, () => queueHasPollers(temporal.client, queue)))) idle.push(queue);
            // The jobs worker's downloads queue has activity pollers only.
            if (name === 'jobs' && !(await withTemporalDeadline(temporal.client, () => queueHasPollers(temporal.client, downloadsQueue(queue), 'activity')))) idle.push(downloadsQueue(queue));
          }
          if (idle.length > 0) throw new Error(`no worker polls ${idle.join(', ')}`);
        },
      },
    ],
  };

  return {
    temporal: temporal.client,
    metrics,
    deps: {
      config,
      db: database.db,
      redis,
      spendRedis,
      keys,
      authFailures: createAuthFailureLimiter(redis.redis, config.GW_AUTH_FAILURES_PER_MINUTE),
      clock: systemClock,
      logger,
      readiness,
      manage,
      gateway,
      temporalCodec: { codec: payloadCodec, sealer: manage.sealer, operatorOrgId: config.GW_OPERATOR_ORG_ID, temporalUiUrl: config.GW_TEMPORAL_UI_URL },
      httpMetrics: metrics?.observeHttpRequest,
    },
    async close() {
      clearInterval(journalRecovery);
      await unsubscribe();
      // Model calls still running settle and log before the writers flush (bounded).
      const drained = await gateway.inFlight.drained(config.GW_SHUTDOWN_GRACE_MS);
      if (!drained) logger.warn({ in_flight: gateway.inFlight.count }, 'stopping with model calls still in flight after the grace period; their holds lapse with their lease');
      // Spend settled under leases reaches the windows, and the leases are given back.
      await spendLeases.close().catch((err: unknown) => logger.warn({ err }, 'could not give spend leases back; they lapse in a few seconds, counted as spent'));
      await rateLeases.close().catch(() => undefined);
      await gateway.requestLog.close();
      await gateway.spendRows.close();
      await budgetCrossingRows.close();
      await gateway.agent.close();
      await Promise.allSettled([database.close(), redis.close(), spendRedis === redis ? undefined : spendRedis.close(), temporal.close()]);
    },
  };
}
