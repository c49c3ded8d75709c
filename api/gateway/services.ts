import type { EndUserCap as ResolvedEndUserCap, EndUserCapRequest } from '../../core/spend/end-user-caps';
import type { BatchWriter } from '../../core/db/batch-writer';
import type { SpendLedger, SpendLedgerRow } from '../../core/spend/ledger';
import type { Agent } from 'undici';
import type { ModelCatalog } from '../../core/catalog/model-catalog';
import type { LearnedParams } from '../../core/chat/prepare';
import type { RequestLogWriter } from '../../core/request-log/writer';
import type { OrgConfig, OrgConfigCache } from '../../core/routing/org-config';
import type { OutputStorage } from '../../core/storage/output-storage';
import type { MediaFiles } from '../../core/media/stored-files';
import type { RedisHandle } from '../../core/redis';
import type { GuardrailPolicies } from '../../core/guardrails/policy-cache';
import type { ResponseCacheStore } from '../../core/response-cache/store';
import type { JobServices } from './jobs';
import type { Sealer } from '../../core/crypto/sealing';

/** What the chat path needs besides the key: configuration, catalog, upstream pools, the log. */
import type { InFlight } from '../../core/in-flight';

export type GatewayServices = {
  orgConfig: OrgConfigCache;
  catalog: ModelCatalog;
  agent: Agent;
  learned: LearnedParams;
  requestLog: RequestLogWriter;
  /** Upstream timeout when neither route nor connection sets one. */
  defaultTimeoutMs: number;
  jobs: JobServices;
  storage: OutputStorage;
  /** Image and speech outputs, stored and linked for their retention (core/media/stored-files.ts). */
  mediaFiles: MediaFiles;
  redis: RedisHandle;
  /** Spend counters and key rate windows (AppDeps.spendRedis). */
  spendRedis: RedisHandle;
  /** Every budget scope's spend: reserved before a priced request, settled after (core/spend). */
  spend: SpendLedger;
  /** The end-customer cap a request meets (cached per organization; core/spend/end-user-caps.ts). */
  endUserCap(config: OrgConfig, request: EndUserCapRequest): Promise<ResolvedEndUserCap | null>;
  /** Settled spend rows, written to Postgres in batches. */
  spendRows: BatchWriter<SpendLedgerRow>;
  /** Guardrail policies per organization, compiled and cached in process (core/guardrails). */
  guardrails: GuardrailPolicies;
  /** Answers kept for reuse (issue 12; core/response-cache). */
  responseCache: ResponseCacheStore;
  /** Where multipart uploads are spooled while a request lasts (`<GW_DATA_DIR>/spool`). */
  spoolDir: string;
  /** Opens sealed tool-gateway server credentials for calls on `/v1/mcp/{server_slug}` (issue 15). */
  sealer: Sealer;
  /** Model calls between their spend hold and its end: a graceful stop waits for them (core/in-flight.ts). */
  inFlight: InFlight;
};

/** Default upstream timeout: long answers from large models take minutes. */
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 120_000;
