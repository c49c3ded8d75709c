import Router from '@koa/router';
import { errorSummary } from '../core/logger';
import type { GatewayState } from './context';

/** One dependency a probe depends on; `check` rejects (or times out) when it is down. */
export type ReadinessCheck = { name: string; check(): Promise<void> };

/** What the probes check: readiness is what serves requests; the deep read adds the durable side. */
export type HealthChecks = {
  /** `/readyz`: Postgres and Redis, without which no request is served. */
  ready: readonly ReadinessCheck[];
  /** `/healthz/deep` adds these: Temporal and the workers polling each queue. */
  deep: readonly ReadinessCheck[];
};

const CHECK_TIMEOUT_MS = 2_000;
/** The deep read is cached this long, so that frequent probes are not Temporal traffic. */
export const DEEP_HEALTH_CACHE_MS = 30_000;

function withTimeout(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

type Report = { ok: boolean; body: { status: string; down?: string[]; checks: Record<string, string>; checked_at?: number } };

async function runChecks(checks: readonly ReadinessCheck[], log: GatewayState['log'] | undefined): Promise<Report> {
  const results = await Promise.all(
    checks.map(async ({ name, check }) => {
      try {
        await withTimeout(check(), CHECK_TIMEOUT_MS);
        return [name, 'ok'] as const;
      } catch (err) {
        log?.warn({ check: name, err: errorSummary(err) }, 'health check failed');
        return [name, 'down'] as const;
      }
    }),
  );
  const down = results.filter(([, s]) => s !== 'ok').map(([n]) => n);
  return { ok: down.length === 0, body: { status: down.length === 0 ? 'ready' : 'unavailable', ...(down.length > 0 ? { down } : {}), checks: Object.fromEntries(results) } };
}

/**
 * `/healthz`: the process lives. `/readyz`: Postgres and Redis answer now, so chat, reads and
 * `/v1/key` are served (a Temporal outage or an idle worker queue does not take the API out of
 * its load balancer: only video submit, read and cancel need them, and they answer 503 on
 * their own). `/healthz/deep`: those and Temporal and a worker polling each queue, cached for
 * DEEP_HEALTH_CACHE_MS (one evaluation at a time). 503 names what is down. These are probes,
 * not API errors, so they answer a status report; unauthenticated, so they name checks only: an
 * error's text (hostnames, addresses, a URL's credentials) goes to the log.
 */
export function healthRouter(checks: HealthChecks): Router<GatewayState> {
  const router = new Router<GatewayState>();
  let deep: { at: number; report: Promise<Report> } | null = null;
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const report = await runChecks(checks.ready, ctx.state.log);
    ctx.status = report.ok ? 200 : 503;
    ctx.body = report.body;
  });
  router.get('/healthz/deep', async (ctx) => {
    const at = Date.now();
    if (!deep || at - deep.at >= DEEP_HEALTH_CACHE_MS) {
      const log = ctx.state.log;
      deep = { at, report: runChecks([...checks.ready, ...checks.deep], log).then((r) => ({ ...r, body: { ...r.body, checked_at: Math.floor(at / 1000) } })) };
    }
    const report = await deep.report;
    ctx.status = report.ok ? 200 : 503;
    ctx.body = report.body;
    ctx.set('Cache-Control', 'no-store');
  });
  return router;
}
