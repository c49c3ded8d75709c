import Router from '@koa/router';
import { errorSummary } from '../core/logger';
import type { GatewayState } from './context';

/** One dependency readiness depends on; `check` rejects (or times out) when it is down. */
export type ReadinessCheck = { name: string; check(): Promise<void> };

const CHECK_TIMEOUT_MS = 2_000;

function withTimeout(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<void>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * `/healthz`: the process lives. `/readyz`: every dependency answers now; 503 names what is
 * down. These are probes for load balancers, not API errors, so they answer a status report.
 * It is unauthenticated, so it names checks only: an error's text (which can carry hostnames,
 * addresses or a URL's credentials) goes to the log, never into the answer.
 */
export function healthRouter(checks: readonly ReadinessCheck[]): Router<GatewayState> {
  const router = new Router<GatewayState>();
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    const results = await Promise.all(
      checks.map(async ({ name, check }) => {
        try {
          await withTimeout(check(), CHECK_TIMEOUT_MS);
          return [name, 'ok'] as const;
        } catch (err) {
          ctx.state.log?.warn({ check: name, err: errorSummary(err) }, 'readiness check failed');
          return [name, 'down'] as const;
        }
      }),
    );
    const down = results.filter(([, s]) => s !== 'ok').map(([n]) => n);
    ctx.status = down.length === 0 ? 200 : 503;
    ctx.body = {
      status: down.length === 0 ? 'ready' : 'unavailable',
      ...(down.length > 0 ? { down } : {}),
      checks: Object.fromEntries(results),
    };
  });
  return router;
}
