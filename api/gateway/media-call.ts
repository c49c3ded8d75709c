import { upstreamTarget, walkPlan, type TryResult, type Walked } from '../../core/chat/execute';
import type { RequestAttempt } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { RequestGuard } from '../../core/guardrails/request-guard';
import { errorSummary } from '../../core/logger';
import type { CostEstimate } from '../../core/pricing/cost';
import { embeddingModel } from '../../core/catalog/embedding-models';
import { MEDIA_UNITS, mediaListRow, type MediaKind } from '../../core/pricing/media-cost';
import { ADAPTERS } from '../../core/providers/adapters';
import { mediaAdapterFor } from '../../core/providers/media';
import type { MediaAdapter, MediaEndpoint } from '../../core/providers/media/types';
import { sendUpstream, type UpstreamSuccess } from '../../core/providers/upstream';
import type { ProviderFailure, UpstreamRequest } from '../../core/providers/types';
import type { ProviderKind } from '../../core/providers/kinds';
import { billedModel, planCandidates, type Candidate, type Plan } from '../../core/routing/candidates';
import type { OrgConfig } from '../../core/routing/org-config';
import type { GatewayContext } from '../context';
import { parseAttribution, routingMetadata, type Attribution } from './chat-request';
import type { GatewayServices } from './services';
import { ageSeconds, consultCache, couldHaveServed, storeAnswer, type CacheOutcome } from './cache-step';
import { resolveCachePolicy, type CacheControl } from '../../core/response-cache/policy';
import type { CachedServing } from '../../core/response-cache/answer';
import { addCutCost, chargedEstimate, endSpend, recordRequestRow, requestLogRow, reserveSpend, type SpendCall } from './spend-step';

/**
 * One image or audio request (issue 14), whatever its endpoint: planned exactly as chat is (a
 * model id or a route slug, the key's connections, allowlists, environments,
 * `routing.providers`, `fallbacks` of the same modality), its worst case held before any call
 * (spec 8), the plan walked with chat's failover rules until a candidate answers, its cost
 * settled, and one request-log row written, refused or served.
 */

/** The gateway's own fields of a media request (spec 4.1's extension fields that apply here). */
export type MediaRouting = {
  model: string;
  fallbacks?: string[];
  routing?: { providers?: { allow?: string[]; deny?: string[] } };
  metadata?: unknown;
  logging?: boolean;
};

/** Which price table an image or audio endpoint's models are in (embeddings are priced per token, as chat). */
export const MEDIA_KIND_OF: Record<Exclude<MediaEndpoint, 'embeddings'>, MediaKind> = {
  'images.generations': 'image',
  'images.edits': 'image',
  'audio.transcriptions': 'transcription',
  'audio.speech': 'speech',
};

export type MediaCall = SpendCall & {
  /** The request's guardrails, when an enabled policy applies to its key (core/guardrails). */
  guard?: RequestGuard;
  /** The response cache's part, for an endpoint that keeps answers (embeddings); null when off or not asked. */
  cache?: CacheOutcome<CachedServing> | null;
  endpoint: MediaEndpoint;
  routing: MediaRouting;
  plan: Plan | null;
  attribution: Attribution;
  logging: boolean;
  started: number;
};

/** A served candidate, with the adapter of its wire. */
export type MediaServed<T> = Walked<T> & { adapter: MediaAdapter };

/** What an endpoint's answer leaves for the request log. */
export type MediaOutcome = { usage: Record<string, unknown> | null; estimate: CostEstimate; response?: unknown };

/** Sends one call to the candidate being tried (its hosts, credentials, timeout, the client's abort). */
export type SendUpstream = (upstream: UpstreamRequest) => Promise<UpstreamSuccess | { ok: false; failure: ProviderFailure }>;

/**
 * How an endpoint's answers are kept and given again (spec 4.1 `cache`, as chat's): the same
 * policy, key scheme, reach check and headers; only what is kept differs.
 */
export type MediaCache<T, E extends CachedServing> = {
  /** What determines the answer, hashed into the key (never the payload itself); read after guardrails. */
  key(): Record<string, unknown>;
  /** What the request asked of the cache (its `cache` field and X-GW-Cache headers). */
  control: CacheControl;
  /** What is kept of a served answer, beside who served it. */
  entry(served: MediaServed<T>): Omit<E, keyof CachedServing>;
  /** Writes the answer from a kept entry (`usage` already says cost 0, `gateway_cache`); answers what the log keeps. */
  answerFromHit(hit: E, usage: Record<string, unknown>, call: MediaCall): unknown;
  /** The usage counts a kept entry stands for. */
  usageOf(hit: E): Record<string, unknown> | null;
};

export type MediaEndpointHandler<T, E extends CachedServing = CachedServing> = {
  /** The response cache, where the endpoint's answers can be kept (embeddings). */
  cache?: MediaCache<T, E>;
  /** What the request log keeps of the request when the organization logs prompts (never file bytes). */
  loggedRequest: Record<string, unknown>;
  /**
   * The request's text that guardrails check before anything is held or sent (a prompt, the
   * text to speak): `read` answers it (asked only when a policy checks input; the plan's
   * candidates say which model's tokenizer reads token ids), `write` puts back what is sent
   * (redacted where a rule redacts) and what the log keeps (never what a rule matched).
   */
  guardedText: { read(candidates: readonly Candidate[]): string[]; write(sent: string[], logged: string[]): void };
  /** The most the request can cost on this candidate; null when nothing prices it. */
  worstCase(candidate: Candidate, config: OrgConfig): CostEstimate;
  /**
   * Why this candidate cannot take the request (an input its wire cannot carry), or null. Such
   * candidates are left out of the plan; when none is left the request is a 400 saying why.
   */
  refusal?(candidate: Candidate, adapter: MediaAdapter): string | null;
  /** One try on one candidate: what it answered, or how it failed (which drives failover). */
  attempt(candidate: Candidate, adapter: MediaAdapter, send: SendUpstream): Promise<TryResult<T>>;
  /** The cost of what was served, and the usage the answer and the log report. */
  cost(served: MediaServed<T>, config: OrgConfig): { estimate: CostEstimate; usage: Record<string, unknown> | null };
  /** Writes the answer (the spend is already settled); answers what the log keeps of it. */
  answer(served: MediaServed<T>, usage: Record<string, unknown>, call: MediaCall): Promise<unknown>;
  /** Lets go of an answer nobody will read (its client left): an unread upstream body, say. */
  discard?(served: MediaServed<T>): void;
};

/** The usage object of a media answer: the counts, then `cost` and `price_source` as chat's. */
export function mediaUsage(counts: Record<string, unknown> | null, estimate: CostEstimate): Record<string, unknown> {
  return { ...counts, cost: estimate?.cost ?? null, ...(estimate && { price_source: estimate.source }) };
}

/** The serving identity in a JSON answer (spec 2.2's fields, as on chat answers). */
export function servedFields(call: MediaCall, served: Walked<unknown>): Record<string, unknown> {
  return { provider: served.candidate.connection.kind, connection: served.candidate.connection.id, route: served.position, route_name: call.plan?.route?.slug ?? null };
}

function logMedia(call: MediaCall, loggedRequest: Record<string, unknown>, outcome: {
  status: number;
  served?: Walked<unknown>;
  attempts: RequestAttempt[];
  usage?: Record<string, unknown> | null;
  estimate?: CostEstimate;
  error?: GatewayError;
  response?: unknown;
  /** On a cache hit, the kept answer given again. */
  hit?: CachedServing;
}): void {
  const capture = call.logging && call.config.promptLoggingEnabled;
  const charged = chargedEstimate(call, outcome.estimate ?? null);
  recordRequestRow(call, requestLogRow(call, {
    endpoint: call.endpoint,
    requestedModel: call.routing.model,
    routeSlug: call.plan?.route?.slug ?? null,
    servedModel: outcome.served?.candidate.upstreamModel ?? outcome.hit?.model ?? null,
    provider: outcome.served?.candidate.connection.kind ?? outcome.hit?.provider ?? null,
    connectionId: outcome.served?.candidate.connection.id ?? outcome.hit?.connection ?? null,
    chainPosition: outcome.served?.position ?? outcome.hit?.route ?? null,
    status: outcome.status,
    errorType: outcome.error?.type ?? null,
    errorCode: outcome.error?.code ?? null,
    stream: false,
    latencyMs: Math.round(performance.now() - call.started),
    attempts: outcome.attempts,
    usage: outcome.usage ?? null,
    cost: charged?.cost ?? null,
    priceSource: charged?.source ?? null,
    guardrails: call.guard?.outcome() ?? null,
    requestBody: capture ? loggedRequest : null,
    // Spec 4.1 logging: image and audio answers are kept only as the links they gave.
    responseBody: capture ? (outcome.response ?? null) : null,
    cacheStatus: call.cache?.status ?? null,
    cacheSourceRequestId: outcome.hit?.requestId ?? null,
  }));
}

/**
 * The models an endpoint knows by name (a bare `dall-e-3` resolves through these): the media
 * price table's rows for the kind, or the embedding models' table; and any model the
 * organization gave a rate of the endpoint's unit (per image, second or character; per input
 * token for embeddings).
 */
export function mediaModelKnown(endpoint: MediaEndpoint, config: OrgConfig): (kind: ProviderKind, name: string) => boolean {
  const rated = (kind: ProviderKind, name: string, has: (p: OrgConfig['prices'][number]) => boolean) => config.prices.some((p) => has(p) && (p.model === name || p.model === `${kind}/${name}`));
  if (endpoint === 'embeddings') return (kind, name) => embeddingModel(kind, name) !== null || rated(kind, name, (p) => p.inputPerMillion !== null);
  const media = MEDIA_KIND_OF[endpoint];
  return (kind, name) => mediaListRow(media, { kind, model: name }) !== null || rated(kind, name, (p) => p.unit !== null);
}

/** What a refused unpriced request tells the customer to enter. */
function missingRate(endpoint: MediaEndpoint): string {
  if (endpoint === 'embeddings') return 'has no input-token price, and a spend limit applies to this request; enter a rate (`input_per_million`)';
  return `has no ${MEDIA_UNITS[MEDIA_KIND_OF[endpoint]]} price, and a spend limit applies to this request; enter a rate (\`unit\`)`;
}

/**
 * The plan of a media request: chat's planning with this endpoint's models. A fallback naming a
 * model of another modality (one the chat catalog knows and this endpoint does not) is left
 * out, as chat leaves out fallbacks whose output differs; candidates whose wire lacks the
 * endpoint are dropped (no call, no attempt).
 */
function planMedia<T>(call: MediaCall, handler: MediaEndpointHandler<T>): Plan {
  const { routing, key, config, services, endpoint } = call;
  const knows = mediaModelKnown(endpoint, config);
  const otherModality = (id: string) => {
    const name = id.slice(id.indexOf('/') + 1);
    const kinds = config.connections.map((c) => c.kind);
    return !kinds.some((k) => knows(k, name) || knows(k, id)) && kinds.some((k) => services.catalog.knows(k, name));
  };
  const plan = planCandidates({
    model: routing.model,
    fallbacks: (routing.fallbacks ?? []).filter((id) => !otherModality(id)),
    allow: routing.routing?.providers?.allow,
    deny: routing.routing?.providers?.deny,
    metadata: routingMetadata(call.attribution),
    key,
    config,
    catalog: services.catalog,
    catalogModelsOnly: true,
    knows,
  });
  const offering = plan.candidates.filter((c) => mediaAdapterFor(c.connection.kind, endpoint) !== null);
  if (offering.length === 0) {
    throw new GatewayError('no_provider_connected', `No connection serving \`${routing.model}\` offers ${endpoint}.`);
  }
  const refusals = offering.map((c) => handler.refusal?.(c, mediaAdapterFor(c.connection.kind, endpoint)!) ?? null);
  const candidates = offering.filter((_, i) => refusals[i] === null);
  if (candidates.length === 0) throw new GatewayError('invalid_request', `No connection serving \`${routing.model}\` can take this request: ${refusals[0]}`);
  return { ...plan, candidates };
}

/**
 * The hold: the dearest candidate's worst case. A candidate nothing prices is refused under a
 * blocking budget (`unpriced_model_under_budget`) unless the organization allows unpriced
 * traffic, as chat's are.
 */
function worstCaseOver<T>(call: MediaCall, handler: MediaEndpointHandler<T>): number {
  let worst = 0;
  for (const candidate of call.plan!.candidates) {
    const estimate = handler.worstCase(candidate, call.config);
    if (!estimate) {
      if (call.config.unpricedBudgetPolicy !== 'allow') {
        throw new GatewayError('unpriced_model_under_budget', `\`${candidate.modelId}\` ${missingRate(call.endpoint)} or allow unpriced traffic.`);
      }
      continue;
    }
    worst = Math.max(worst, estimate.cost);
  }
  return worst;
}

/**
 * Guardrails' input stage (spec 2.6) on the request's text, before any hold or provider call, as
 * chat's: what the rules redact is redacted in what is sent; a block (or a failed detector
 * under `on_engine_error: block`) is a 403 that reached nothing.
 */
async function guardText<T>(call: MediaCall, handler: MediaEndpointHandler<T>): Promise<void> {
  const rules = await call.services.guardrails.rulesFor(call.key);
  if (!rules) return;
  const guard = (call.guard = new RequestGuard(rules, call.key.orgId));
  // Nothing to check on the way in: the request is read as it came (token ids undecoded).
  if (rules.input.length === 0) return;
  const texts = handler.guardedText.read(call.plan!.candidates);
  const { messages, refusal } = await guard.checkInput(texts.map((content) => ({ role: 'user' as const, content })));
  const word = guard.header(false);
  if (word) call.ctx.set('X-GW-Guardrails', word);
  const textOf = (m: { content?: unknown }) => (typeof m.content === 'string' ? m.content : '');
  handler.guardedText.write(messages.map(textOf), (guard.logMessages ?? messages).map(textOf));
  if (refusal) throw refusal;
}

/** Headers every media answer carries (binary ones have no JSON body to say it in). */
function setServedHeaders(call: MediaCall, served: { provider: string; connection: string; route: string }, estimate: CostEstimate): void {
  const { ctx } = call;
  ctx.set('X-GW-Provider', served.provider);
  ctx.set('X-GW-Connection', served.connection);
  ctx.set('X-GW-Route', served.route);
  if (estimate) {
    ctx.set('X-GW-Cost', String(estimate.cost));
    ctx.set('X-GW-Price-Source', estimate.source);
  }
}

/**
 * An answer whose client left while the provider was making it: nobody reads it, but it was
 * served and is billed, so its cost is settled and the request logged 499 with usage and cost.
 */
function settleAbandoned<T>(call: MediaCall, handler: MediaEndpointHandler<T>, walked: Awaited<ReturnType<typeof walkPlan<T>>>): void {
  call.ctx.respond = false;
  if (!walked.ok) {
    endSpend(call, null);
    logMedia(call, handler.loggedRequest, { status: 499, attempts: walked.attempts });
    return;
  }
  const served: MediaServed<T> = { ...walked, adapter: mediaAdapterFor(walked.candidate.connection.kind, call.endpoint)! };
  call.servedBy = { provider: walked.candidate.connection.kind, model: billedModel(walked.candidate) };
  handler.discard?.(served);
  let priced: ReturnType<MediaEndpointHandler<T>['cost']> = { estimate: null, usage: null };
  try {
    priced = handler.cost(served, call.config);
  } catch {
    // Not priced: the hold is given back below, as for any answer without a cost.
  }
  endSpend(call, priced.estimate);
  logMedia(call, handler.loggedRequest, { status: 499, served, attempts: served.attempts, usage: priced.usage, estimate: priced.estimate });
}

const servingOf = (served: Walked<unknown>) => ({ provider: served.candidate.connection.kind, connection: served.candidate.connection.id, route: served.position });

const CACHE_HIT_ESTIMATE: CostEstimate = { cost: 0, source: 'gateway_cache' };

/**
 * A kept answer given again (spec 2.2, 8, as chat's): no budget held, no provider called, cost 0
 * with price source `gateway_cache`; who originally served it in the headers and the log.
 */
function answerFromCache<T, E extends CachedServing>(call: MediaCall, cache: MediaCache<T, E>, hit: E, loggedRequest: Record<string, unknown>): void {
  const now = Date.now();
  call.ctx.set('X-GW-Cache-Age', String(ageSeconds(hit, now)));
  call.ctx.set('X-GW-Cache-Source', hit.requestId);
  setServedHeaders(call, hit, CACHE_HIT_ESTIMATE);
  const counts = cache.usageOf(hit);
  const response = cache.answerFromHit(hit, mediaUsage(counts, CACHE_HIT_ESTIMATE), call);
  logMedia(call, loggedRequest, { status: 200, attempts: [], usage: counts, estimate: CACHE_HIT_ESTIMATE, response, hit });
}

/** Keeps a served answer for reuse when this request may write the cache. */
function keepAnswer<T, E extends CachedServing>(call: MediaCall, cache: MediaCache<T, E>, served: MediaServed<T>): void {
  if (!call.cache?.writeTo) return;
  const entry = {
    requestId: call.ctx.state.requestId,
    storedAt: Date.now(),
    model: served.candidate.upstreamModel,
    provider: served.candidate.connection.kind,
    connection: served.candidate.connection.id,
    upstreamModel: served.candidate.upstreamModel,
    route: served.position,
    ...cache.entry(served),
  } as E;
  storeAnswer(call.services.responseCache, call.cache, entry, (err) => call.ctx.state.log?.warn({ err: errorSummary(err) }, 'response cache write failed'));
}

/** Serves one media request through `handler` (see the module comment). */
export async function serveMedia<T, E extends CachedServing = CachedServing>(ctx: GatewayContext, services: GatewayServices, endpoint: MediaEndpoint, routing: MediaRouting, handler: MediaEndpointHandler<T, E>): Promise<void> {
  const started = performance.now();
  const key = ctx.state.key!;
  const attribution = parseAttribution(routing.metadata);
  const config = await services.orgConfig.get(key.orgId);
  const call: MediaCall = { ctx, services, key, config, endpoint, routing, plan: null, attribution, logging: routing.logging !== false, started, createdAt: new Date(), hold: null };
  // Every way out writes its one row: a defect as the 500 the error middleware will answer.
  const asLogged = (err: unknown) => (err instanceof GatewayError ? err : new GatewayError('internal_error', 'The gateway hit an internal error.'));
  const refuse = (err: unknown, attempts: RequestAttempt[] = []): never => {
    const logged = asLogged(err);
    logMedia(call, handler.loggedRequest, { status: logged.status, attempts, error: logged });
    throw err;
  };

  try {
    const cachePolicy = handler.cache ? resolveCachePolicy(config.responseCache, config.plan, handler.cache.control) : null;
    const plan = (call.plan = planMedia(call, handler));
    await guardText(call, handler);
    // The cache is asked after guardrails (a blocked request is never answered, even from it)
    // and before any budget is held: a hit takes no reservation (spec 8).
    if (cachePolicy && handler.cache) {
      const cached = await consultCache<E>(ctx, services.responseCache, key.orgId, cachePolicy, handler.cache.key(), call.logging, (hit) => couldHaveServed(plan, hit));
      call.cache = cached;
      if (cached?.hit) return answerFromCache(call, handler.cache, cached.hit, handler.loggedRequest);
    }
    await reserveSpend(call, () => worstCaseOver(call, handler), plan.candidates[0]);
  } catch (err) {
    refuse(err);
  }
  const plan = call.plan!;

  // A client that hangs up stops further attempts; a call already sent runs to its answer, which
  // the provider bills whether or not anyone reads it (as chat's whole answers).
  const clientGone = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) clientGone.abort();
  });
  let walked: Awaited<ReturnType<typeof walkPlan<T>>>;
  try {
    walked = await walkPlan(plan, (candidate) => {
      const adapter = mediaAdapterFor(candidate.connection.kind, endpoint)!;
      const target = upstreamTarget(plan, candidate, { defaultTimeoutMs: services.defaultTimeoutMs, requestId: call.ctx.state.requestId });
      // A call our timeout cut was sent: the provider makes (and bills) what it was asked for, so
      // it is charged as that candidate's worst case, with whatever finally served.
      const send = async (upstream: Parameters<typeof sendUpstream>[3]) => {
        const sent = await sendUpstream(services.agent, ADAPTERS[candidate.connection.kind], target, upstream);
        if (!sent.ok && sent.failure.kind === 'timeout') addCutCost(call, candidate, handler.worstCase(candidate, call.config));
        return sent;
      };
      return handler.attempt(candidate, adapter, send);
    }, { stop: clientGone.signal, trace: ctx.state.trace });
  } catch (err) {
    endSpend(call, null);
    if (!clientGone.signal.aborted) refuse(err);
    // A client gone while a call failed is not an error of ours: log it (499) and stop.
    logMedia(call, handler.loggedRequest, { status: 499, attempts: [] });
    ctx.respond = false;
    return;
  }
  if (clientGone.signal.aborted) return settleAbandoned(call, handler, walked);
  if (!walked.ok) {
    endSpend(call, null);
    logMedia(call, handler.loggedRequest, { status: walked.error.status, attempts: walked.attempts, error: walked.error });
    throw walked.error;
  }

  const served: MediaServed<T> = { ...walked, adapter: mediaAdapterFor(walked.candidate.connection.kind, endpoint)! };
  call.servedBy = { provider: walked.candidate.connection.kind, model: billedModel(walked.candidate) };
  // The provider was called and bills for it: the spend settles whatever happens to the answer.
  let priced: ReturnType<MediaEndpointHandler<T>['cost']>;
  try {
    priced = handler.cost(served, config);
  } catch (err) {
    // Not priced: the hold is given back, as for any answer without a cost.
    endSpend(call, null);
    refuse(err, served.attempts);
  }
  const { estimate, usage } = priced!;
  endSpend(call, estimate);
  setServedHeaders(call, servingOf(served), estimate);
  const wire = mediaUsage(usage, estimate);
  let response: unknown;
  try {
    response = await handler.answer(served, wire, call);
  } catch (err) {
    ctx.state.log?.error({ err: errorSummary(err) }, 'media answer failed after the provider answered');
    const error = err instanceof GatewayError ? err : new GatewayError('internal_error', 'The answer could not be stored.');
    logMedia(call, handler.loggedRequest, { status: error.status, served, attempts: served.attempts, usage, estimate, error });
    throw error;
  }
  logMedia(call, handler.loggedRequest, { status: 200, served, attempts: served.attempts, usage, estimate, response });
  if (handler.cache) keepAnswer(call, handler.cache, served);
}
