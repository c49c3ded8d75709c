import { NATIVE_REQUEST, type ChatBody } from '../providers/types';
import type { ResponseCacheSettings } from '../db/schema/guardrail-policy';
import { GatewayError } from '../errors';

export const CACHE_MODES = ['default', 'bypass', 'refresh', 'read_only'] as const;
export type CacheMode = (typeof CACHE_MODES)[number];

/** What a request asked of the cache (spec 4.1 `cache` and the X-GW-Cache headers), merged. */
export type CacheControl = { mode?: CacheMode; ttlSeconds?: number; namespace?: string };

export const MIN_CACHE_TTL_SECONDS = 60;
export const MAX_CACHE_TTL_SECONDS = 2_592_000;
/** The longest an answer may be kept, by plan (issue 12; docs/decisions.md). */
export const PLAN_MAX_CACHE_TTL_SECONDS = { trial: 86_400, team: 7 * 86_400, business: 30 * 86_400 } as const;
export type Plan = keyof typeof PLAN_MAX_CACHE_TTL_SECONDS;

export const DEFAULT_NAMESPACE = 'default';

/** How the cache takes part in one request; `off` when the organization has it switched off. */
export type CachePolicy =
  | { state: 'off' }
  | { state: 'on'; read: boolean; write: boolean; mode: CacheMode; ttlSeconds: number; namespace: string };

/**
 * The organization's switch and default, narrowed by the request (it can never turn the cache
 * on): a TTL over the plan's maximum is 400 `cache_ttl_too_long`; the organization's default
 * is held to the plan's maximum too.
 */
export function resolveCachePolicy(settings: ResponseCacheSettings, plan: Plan, control: CacheControl): CachePolicy {
  const planMax = PLAN_MAX_CACHE_TTL_SECONDS[plan];
  if (control.ttlSeconds !== undefined && control.ttlSeconds > planMax) {
    throw new GatewayError('cache_ttl_too_long', `Cache TTL may be at most ${planMax} seconds on the ${plan} plan.`);
  }
  if (!settings.enabled) return { state: 'off' };
  const mode = control.mode ?? 'default';
  return {
    state: 'on',
    mode,
    read: mode === 'default' || mode === 'read_only',
    write: mode === 'default' || mode === 'refresh',
    ttlSeconds: control.ttlSeconds ?? Math.min(settings.default_ttl_seconds, planMax),
    namespace: control.namespace ?? DEFAULT_NAMESPACE,
  };
}

/**
 * Requests whose answer is not one reusable answer (issue 12, docs/decisions.md): several
 * choices, token log-probabilities (they describe one sampling run), and audio output. Also a
 * client protocol's request carrying what its translation leaves out (issue 53): the key would
 * not tell it from one without, and a native answer (thinking blocks, a built-in tool's items)
 * cannot be kept as the chat choices the cache holds.
 */
export function uncacheableReason(body: Record<string, unknown>): string | null {
  if ((body as ChatBody)[NATIVE_REQUEST]?.leftOut?.length) return 'fields only the client\'s wire carries';
  if (typeof body.n === 'number' && body.n > 1) return 'n > 1';
  if (body.logprobs === true || body.top_logprobs !== undefined) return 'logprobs';
  if (Array.isArray(body.modalities) && body.modalities.includes('audio')) return 'audio output';
  return null;
}
