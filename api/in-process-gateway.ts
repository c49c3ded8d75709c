import { and, desc, eq, isNull } from 'drizzle-orm';
import { inject } from 'light-my-request';
import type { BatchItemAnswer, BatchItemCaller } from '../activities/batch-run';
import type { Config } from '../core/config';
import { gatewayKeys } from '../core/db/schema';
import type { Logger } from '../core/logger';
import { createApp } from './app';
import { BATCH_ITEM_AUTH, type BatchItemAuth } from './batch-item-auth';
import { startApiRuntime } from './runtime';
import { loadKeyContext } from '../core/auth/gateway-key-auth';
import { createNativeBatchServices, type NativeBatchServices } from './native-batch-services';

export type InProcessGateway = { callItem: BatchItemCaller; native: NativeBatchServices; close(): Promise<void> };

/** How long the key a batch runs as is taken as known before it is looked up again. */
const KEY_LOOKUP_TTL_MS = 30_000;

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
  const secretHashes = new Map<string, { hash: string; at: number }>();

  /**
   * The key a batch's items run as: the newest unrevoked key of the batch key's lineage, so a
   * rotation mid-batch carries the batch over to the successor (as it carries spend limits)
   * rather than failing its remaining items when the old key's overlap ends; with none, the
   * batch's own key, whose refusal (revoked) each item then answers. Looked up again after
   * KEY_LOOKUP_TTL_MS, so a rotation is seen within that.
   */
  async function secretHashOf(keyId: string): Promise<string | null> {
    const known = secretHashes.get(keyId);
    if (known && Date.now() - known.at < KEY_LOOKUP_TTL_MS) return known.hash;
    const [own] = await runtime.deps.db.select({ lineageId: gatewayKeys.lineageId, secretHash: gatewayKeys.secretHash }).from(gatewayKeys).where(eq(gatewayKeys.id, keyId));
    if (!own) return null;
    const [current] = await runtime.deps.db.select({ secretHash: gatewayKeys.secretHash }).from(gatewayKeys)
      .where(and(eq(gatewayKeys.lineageId, own.lineageId), isNull(gatewayKeys.revokedAt)))
      .orderBy(desc(gatewayKeys.createdAt)).limit(1);
    const hash = current?.secretHash ?? own.secretHash;
    secretHashes.set(keyId, { hash, at: Date.now() });
    return hash;
  }

  async function send(batchId: string, secretHash: string, endpoint: string, body: Record<string, unknown>): Promise<BatchItemAnswer> {
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
  }

  return {
    async callItem({ batchId, keyId, endpoint, body }): Promise<BatchItemAnswer> {
      const secretHash = await secretHashOf(keyId);
      if (!secretHash) return { status: 401, body: { error: { message: 'The key that created this batch no longer exists.', type: 'authentication_error', code: null } }, requestId: null, retryAfterMs: null };
      const answer = await send(batchId, secretHash, endpoint, body);
      if (answer.status !== 401) return answer;
      // The key known here may have been rotated out since: look again before believing it.
      secretHashes.delete(keyId);
      const fresh = await secretHashOf(keyId);
      return fresh && fresh !== secretHash ? send(batchId, fresh, endpoint, body) : answer;
    },
    // The key a batch runs as, as a request would find it (its lineage's newest unrevoked key).
    native: createNativeBatchServices(runtime.deps, async (keyId) => {
      const hash = await secretHashOf(keyId);
      return hash ? loadKeyContext(runtime.deps.db, hash) : null;
    }),
    close: () => runtime.close(),
  };
}
