import path from 'node:path';
import { z } from 'zod';
import { parseKeyring } from './crypto/sealing';

/** A Redis URL, or several comma-separated (a Redis Cluster's seed nodes). */
const redisUrl = z.string().refine((value) => value.split(',').every((part) => URL.canParse(part.trim())), 'a redis:// URL, or several comma-separated (a cluster\'s seed nodes)');

/** Thrown for any configuration problem; entry points print its message as one line and exit. */
export class ConfigError extends Error {}

const booleanFlag = z
  .enum(['true', 'false', '1', '0', ''])
  .default('false')
  .transform((v) => v === 'true' || v === '1');

/**
 * Each task queue's worker, sized for a 2-core box (docs/operations.md, "Worker settings"):
 * activities run at once (`GW_WORKER_<QUEUE>_ACTIVITY_SLOTS`) and workflows kept in the sticky
 * cache (`GW_WORKER_<QUEUE>_STICKY_CACHE`). `DOWNLOADS` is the jobs worker's second queue, where
 * finished renders are copied to storage, so that long downloads never take the slots status
 * checks and submits need.
 */
export const WORKER_DEFAULTS = {
  JOBS: { activitySlots: 200, stickyCache: 2_000, newWorkflowShare: 0.2 },
  DOWNLOADS: { activitySlots: 8, stickyCache: 0, newWorkflowShare: 0.2 },
  WEBHOOKS: { activitySlots: 200, stickyCache: 2_000, newWorkflowShare: 0.2 },
  MAINTENANCE: { activitySlots: 40, stickyCache: 200, newWorkflowShare: 0.2 },
} as const;
export type WorkerQueue = keyof typeof WORKER_DEFAULTS;

const workerCount = (min: number, max: number, fallback: number) => z.coerce.number().int().min(min).max(max).default(fallback);
type WorkerCount = ReturnType<typeof workerCount>;

function workerSettings() {
  const shape: Record<string, WorkerCount> = {};
  for (const [queue, d] of Object.entries(WORKER_DEFAULTS)) {
    shape[`GW_WORKER_${queue}_ACTIVITY_SLOTS`] = workerCount(1, 100_000, d.activitySlots);
    shape[`GW_WORKER_${queue}_STICKY_CACHE`] = workerCount(0, 1_000_000, d.stickyCache);
  }
  return shape as Record<`GW_WORKER_${WorkerQueue}_${'ACTIVITY_SLOTS' | 'STICKY_CACHE'}`, WorkerCount>;
}

/** One queue's worker settings from the configuration. */
export function workerSettingsOf(config: Config, queue: WorkerQueue): { activitySlots: number; stickyCache: number; shutdownGraceMs: number; newWorkflowShare: number } {
  return {
    activitySlots: config[`GW_WORKER_${queue}_ACTIVITY_SLOTS`], stickyCache: config[`GW_WORKER_${queue}_STICKY_CACHE`], shutdownGraceMs: config.GW_SHUTDOWN_GRACE_MS,
    newWorkflowShare: WORKER_DEFAULTS[queue].newWorkflowShare,
  };
}

const configSchema = z
  .object({
    NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
    PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    HOST: z.string().default('0.0.0.0'),
    /** The ops port (Prometheus `GET /metrics`); unset: no metrics are kept and none are served. */
    GW_OPS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
    /**
     * Where the ops port listens: this machine only unless the operator says otherwise (issue 52).
     * Its labels name tenants' models (a fine-tune id holds the customer's provider organization)
     * and its counters their spend.
     */
    GW_OPS_HOST: z.string().min(1).default('127.0.0.1'),
    /** When set, `GET /metrics` answers only `Authorization: Bearer <this>` (401 otherwise). */
    GW_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces (it is sent in a header)').optional(),
    /** A worker's Temporal SDK metrics (its Prometheus exporter); unset: none. */
    GW_TEMPORAL_METRICS_PORT: z.coerce.number().int().min(1).max(65535).optional(),
    /**
     * Where the Temporal SDK's metrics listen: its own setting, loopback by default, since the
     * SDK's exporter takes no token (GW_METRICS_TOKEN guards only the ops port).
     */
    GW_TEMPORAL_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    DATABASE_URL: z.string().url().optional(),
    /** One Redis, or a Redis Cluster's seed nodes, comma-separated. */
    REDIS_URL: redisUrl.optional(),
    /** A Redis of their own for spend counters and key rate windows (one that never evicts), when REDIS_URL's may evict. */
    SPEND_REDIS_URL: redisUrl.optional(),
    REDIS_KEY_PREFIX: z.string().default('gw:'),
    TEMPORAL_ADDRESS: z.string().optional(),
    TEMPORAL_NAMESPACE: z.string().default('default'),
    /** Prepended to every task queue name, so several deployments (or test files) can share one Temporal namespace. */
    GW_TASK_QUEUE_PREFIX: z.string().default(''),
    GW_DATA_DIR: z.string().default('.data'),
    /** Multiplies every durable wait (job checks, webhook schedule, retention, rotation overlaps). */
    GW_SCHEDULE_SCALE: z.coerce.number().positive().max(1000).default(1),
    /**
     * How long a graceful stop (SIGTERM) waits for requests and model calls in flight before it
     * closes anyway; for a worker, the activities in flight (submits, deliveries, downloads).
     */
    GW_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
    ...workerSettings(),
    /** A batch's items in flight at once (issue 56), within the key's own rate limit. */
    GW_BATCH_ITEM_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
    /** Items one batch activity takes: a retry after a lost worker re-reads at most this many. */
    GW_BATCH_CHUNK_ITEMS: z.coerce.number().int().min(1).max(10_000).default(100),
    /** Chunks one batch run goes through before it continues as new (keeps its history small). */
    GW_BATCH_CHUNKS_PER_RUN: z.coerce.number().int().min(1).max(1_000).default(100),
    GW_ALLOW_PRIVATE_NETWORK: booleanFlag,
    /** Trust X-Forwarded-For from a load balancer when deciding the client address. */
    GW_TRUST_PROXY: booleanFlag,
    /** Failed authentications one address may make per minute before 429. */
    GW_AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().positive().default(30),
    /** The Temporal UI, for links from a job to its workflow (`npm start` sets its dev server's). */
    GW_TEMPORAL_UI_URL: z.string().url().optional(),
    /** The operator's tracing UI, one trace's page with `{trace_id}` in it (Jaeger: `http://host:16686/trace/{trace_id}`). */
    GW_TRACE_URL_TEMPLATE: z.string().url().refine((v) => v.includes('{trace_id}'), 'must contain {trace_id}').optional(),
    /**
     * The operator's own organization: only its tokens see the Temporal UI's address and
     * namespace in a job's read (`npm start` sets its demo organization). Unset: no one does.
     */
    GW_OPERATOR_ORG_ID: z.string().min(1).optional(),
    /** The address clients reach the API at, for links it hands out (job output URLs). */
    GW_PUBLIC_URL: z.string().url().optional(),
    /** Where alert emails are sent (`smtp://user:pass@host:587`, `smtps://...`); unset: email channels fail their deliveries. */
    SMTP_URL: z.string().url().optional(),
    /** The From of alert emails. */
    SMTP_FROM: z.string().default('Model gateway alerts <alerts@localhost>'),
    /**
     * Master keys for sealed fields: `<version>:<base64 of 32 bytes>`, comma-separated, current
     * first. `npm start` generates one under GW_DATA_DIR for development.
     */
    GW_SEALING_KEYS: z
      .string()
      .optional()
      .superRefine((value, ctx) => {
        if (value === undefined) return;
        try {
          parseKeyring(value);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
        }
      }),
  })
  .superRefine((c, ctx) => {
    if (c.NODE_ENV === 'production' && c.GW_SCHEDULE_SCALE !== 1) {
      ctx.addIssue({
        code: 'custom',
        path: ['GW_SCHEDULE_SCALE'],
        message: 'must be 1 when NODE_ENV=production (it compresses durable schedules for development and tests)',
      });
    }
  });

export type Config = z.infer<typeof configSchema> & { dataDir: string };

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // `VAR=` in a shell or a compose file means "not set", not "set to nothing".
  const given = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = configSchema.safeParse(given);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${issue.path.join('.')} ${issue.message}`);
  }
  return { ...parsed.data, dataDir: path.resolve(parsed.data.GW_DATA_DIR) };
}

type ServiceUrl = 'DATABASE_URL' | 'REDIS_URL' | 'TEMPORAL_ADDRESS' | 'GW_SEALING_KEYS';

/** Production entry points need real service addresses; `npm start` fills them for development. */
export function requireSetting(config: Config, name: ServiceUrl): string {
  const value = config[name];
  if (!value) throw new ConfigError(`${name} is not set (npm start sets it for development; see README)`);
  return value;
}

/** Where clients reach the API: GW_PUBLIC_URL, else this machine on PORT. */
export function publicBaseUrl(config: Config): string {
  return (config.GW_PUBLIC_URL ?? `http://localhost:${config.PORT}`).replace(/\/+$/, '');
}
