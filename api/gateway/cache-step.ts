import { traceEvent } from '../../core/observability/tracing';
import type { GatewayContext } from '../context';
import { GatewayError } from '../../core/errors';
import type { CachedAnswer, CachedServing } from '../../core/response-cache/answer';
import type { Plan } from '../../core/routing/candidates';
import { responseCacheKey } from '../../core/response-cache/key';
import { uncacheableReason, type CachePolicy } from '../../core/response-cache/policy';
import { ResponseCacheUnavailable, type ResponseCacheStore } from '../../core/response-cache/store';

export type CacheStatus = 'hit' | 'miss' | 'bypass' | 'uncacheable';

/** The cache's part in one request once it was consulted; null when the cache is off for it. */
export type CacheOutcome<E extends CachedServing = CachedAnswer> = {
  status: CacheStatus;
  /** Where a fresh answer is stored, or null when this request must not write. */
  writeTo: { key: string; ttlSeconds: number } | null;
  hit: E | null;
};

const HEADER: Record<CacheStatus, string> = { hit: 'HIT', miss: 'MISS', bypass: 'BYPASS', uncacheable: 'UNCACHEABLE' };

/**
 * The cache step of spec 4.1, before any budget is held: `X-GW-Cache` on the answer, and a hit
 * when one is stored. `refresh` skips the read and stores the fresh answer (status `miss`);
 * `bypass` neither reads nor writes; `read_only` never writes; `logging: false` never writes.
 * With Redis unreachable the request goes on uncached (`BYPASS`), unless it demanded
 * `read_only`: then 400 `response_cache_unavailable`.
 *
 * Entries are shared by the organization's keys, which differ in what they may reach
 * (environments, allowed providers, `routing.providers`): a stored answer is a hit only when
 * this request could have been served by the connection and model that produced it
 * (`servable`); otherwise it is a miss, and the fresh answer takes its place.
 */
export async function consultCache<E extends CachedServing = CachedAnswer>(ctx: GatewayContext, store: ResponseCacheStore, orgId: string, policy: CachePolicy, body: Record<string, unknown>, logging: boolean, servable: (hit: E) => boolean): Promise<CacheOutcome<E> | null> {
  if (policy.state === 'off') {
    ctx.set('X-GW-Cache', 'DISABLED');
    return null;
  }
  const outcome = await decide(store, orgId, policy, body, logging, servable);
  ctx.set('X-GW-Cache', HEADER[outcome.status]);
  const trace = ctx.state.trace;
  if (trace?.recording) traceEvent(trace, 'gw.cache', { 'gw.cache': outcome.status });
  return outcome;
}

async function decide<E extends CachedServing>(store: ResponseCacheStore, orgId: string, policy: CachePolicy & { state: 'on' }, body: Record<string, unknown>, logging: boolean, servable: (hit: E) => boolean): Promise<CacheOutcome<E>> {
  if (policy.mode === 'bypass') return { status: 'bypass', writeTo: null, hit: null };
  if (uncacheableReason(body)) return { status: 'uncacheable', writeTo: null, hit: null };
  const key = responseCacheKey(orgId, policy.namespace, body);
  const writeTo = policy.write && logging ? { key, ttlSeconds: policy.ttlSeconds } : null;
  if (!policy.read) return { status: 'miss', writeTo, hit: null };
  try {
    const hit = await store.get<E>(key);
    return hit && servable(hit) ? { status: 'hit', writeTo: null, hit } : { status: 'miss', writeTo, hit: null };
  } catch (err) {
    if (!(err instanceof ResponseCacheUnavailable)) throw err;
    if (policy.mode === 'read_only') throw new GatewayError('response_cache_unavailable', 'The response cache is unavailable and this request asked to be answered from it only (`read_only`).');
    return { status: 'bypass', writeTo: null, hit: null };
  }
}

/** The `cache` object of an answer (spec 2.2). */
export function cacheField<E extends CachedServing>(outcome: CacheOutcome<E>, now: number): Record<string, unknown> {
  if (outcome.status !== 'hit' || !outcome.hit) return { status: outcome.status };
  return { status: 'hit', age_seconds: ageSeconds(outcome.hit, now), source_request_id: outcome.hit.requestId, provider_billed: false };
}

export function ageSeconds(hit: CachedServing, now: number): number {
  return Math.max(0, Math.floor((now - hit.storedAt) / 1000));
}

/** Stores a complete answer off the answer's path; a store that fails loses only the reuse. */
export function storeAnswer<E extends CachedServing>(store: ResponseCacheStore, outcome: CacheOutcome<E> | null, answer: E, onError: (err: unknown) => void): void {
  if (!outcome?.writeTo) return;
  store.put(outcome.writeTo.key, answer, outcome.writeTo.ttlSeconds).catch(onError);
}

/** Whether a stored answer came from a connection and model this request's plan could have used. */
export function couldHaveServed(plan: Plan, hit: CachedServing): boolean {
  return plan.candidates.some((c) => c.connection.id === hit.connection && (hit.upstreamModel === undefined || c.upstreamModel === hit.upstreamModel));
}
