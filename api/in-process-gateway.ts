import { eq } from 'drizzle-orm';
import { inject } from 'light-my-request';
import type { BatchItemAnswer, BatchItemCaller } from '../activities/batch-run';
import type { Config } from '../core/config';
import { gatewayKeys } from '../core/db/schema';
import type { Logger } from '../core/logger';
import { createApp } from './app';
import { BATCH_ITEM_AUTH, type BatchItemAuth } from './batch-item-auth';
import { startApiRuntime } from './runtime';

export type InProcessGateway = { callItem: BatchItemCaller; close(): Promise<void> };

/** The Retry-After a 429 gave, in milliseconds; null without one. */
function retryAfterMs(header: string | string[] | undefined): number | null {
  const value = Number(Array.isArray(header) ? header[0] : header);
  return Number.isFinite(value) && value >= 0 ? value * 1000 : null;
}

/**
 * The gateway's own application, run inside a worker for batch items (issue 56): each item is
 * a request injected into the same Koa application the API serves (light-my-request: no socket,
 * no port), so it goes through exactly what a client's request does: the key's checks, routes
 * and failover, spend holds and limits, rate limits, guardrails, the response cache and the
 * request log (with the batch's id). The runtime is the API's (its caches, leases and writers),
 * started once per worker process on the first batch item.
 */
export async function startInProcessGateway(config: Config, logger: Logger): Promise<InProcessGateway> {
  const runtime = await startApiRuntime(config, logger);
  const handle = createApp(runtime.deps).callback();
  const secretHashes = new Map<string, string>();

  async function secretHashOf(keyId: string): Promise<string | null> {
    const known = secretHashes.get(keyId);
    if (known) return known;
    const [row] = await runtime.deps.db.select({ secretHash: gatewayKeys.secretHash }).from(gatewayKeys).where(eq(gatewayKeys.id, keyId));
    if (row) secretHashes.set(keyId, row.secretHash);
    return row?.secretHash ?? null;
  }

  return {
    async callItem({ batchId, keyId, endpoint, body }): Promise<BatchItemAnswer> {
      const secretHash = await secretHashOf(keyId);
      if (!secretHash) return { status: 401, body: { error: { message: 'The key that created this batch no longer exists.', type: 'authentication_error', code: null } }, requestId: null, retryAfterMs: null };
      const auth: BatchItemAuth = { batchId, secretHash };
      const response = await inject((req, res) => {
        (req as unknown as Record<symbol, BatchItemAuth>)[BATCH_ITEM_AUTH] = auth;
        void handle(req, res);
      }, { method: 'POST', url: endpoint, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
      let parsed: unknown;
      try {
        parsed = response.json();
      } catch {
        parsed = { error: { message: 'The gateway answered without a JSON body.', type: 'internal_error', code: null } };
      }
      const requestId = response.headers['x-gw-request-id'];
      return { status: response.statusCode, body: parsed, requestId: typeof requestId === 'string' ? requestId : null, retryAfterMs: retryAfterMs(response.headers['retry-after']) };
    },
    close: () => runtime.close(),
  };
}
