import { PassThrough } from 'node:stream';
import { completeChat, startChatStream, type CutBy, type LiveStream, type NotServed, type Served } from '../../core/chat/execute';
import { readOnSlot } from '../../core/chat/read-on';
import type { RequestAttempt } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { RequestGuard } from '../../core/guardrails/request-guard';
import { traceEvent } from '../../core/observability/tracing';
import { errorSummary } from '../../core/logger';
import { estimateCost, type CostEstimate } from '../../core/pricing/cost';
import { changesPrice, priceChangingFeatures, withPriceChangingFeatures } from '../../core/pricing/priced-features';
import { meterKey, refuseOverRate } from '../middleware/key-rate-limit';
import { worstCaseCost } from '../../core/spend/worst-case';
import { billedUsage, wholeAnswerUsage } from './billed-usage';
import { NATIVE_REQUEST, type ChatBody, type ChatResult, type Choice, type ChunkChoice, type Usage } from '../../core/providers/types';
import { billedModel, planCandidates, type Plan } from '../../core/routing/candidates';
import { ADAPTERS } from '../../core/providers/adapters';
import type { GatewayContext } from '../context';
import { parseCacheControl, routingMetadata, type Attribution } from './chat-request';
import type { GatewayServices } from './services';
import { relayStream, STREAM_HIGH_WATER_MARK, type NativeEvent, type StreamTally } from './stream-answer';
import { ChoiceAssembler, replayChunks, type CachedAnswer } from '../../core/response-cache/answer';
import { resolveCachePolicy, type CachePolicy, type CacheControl } from '../../core/response-cache/policy';
import { ageSeconds, cacheField, consultCache, couldHaveServed, storeAnswer, type CacheOutcome } from './cache-step';
import { addCutCost, chargedEstimate, endSpend, recordRequestRow, requestLogRow, reserveSpend, type SpendCall } from './spend-step';
import type { AnswerIdentity, ChatWire } from './chat-wire';

/**
 * The one chat call every model route runs (chat completions, decisions, Anthropic Messages,
 * OpenAI Responses): plan, guardrails, cache, spend, the provider call with failover, the answer
 * in the client's wire (./chat-wire.ts), the request log. A route file parses its protocol into a
 * `ChatCall` and a `ChatRequest`, and hands them here.
 */
export type ChatCall = SpendCall & {
  /** The request log's `endpoint`. */
  endpoint: string;
  /** Null when the request was refused before any candidate was found. */
  plan: Plan | null;
  body: ChatBody;
  attribution: Attribution;
  logging: boolean;
  started: number;
  /** The response cache's part in this request; null when the cache is off for it. */
  cache: CacheOutcome | null;
  /** The request's guardrails, when an enabled policy applies to its key (core/guardrails). */
  guard?: RequestGuard;
  /** A model call a decision made (api/gateway/decisions.ts): the decision's id (the call's own is `callId`). */
  decisionId?: string;
};
type Call = ChatCall;

/** What the route read from its protocol besides the provider body: routing and the answer's form. */
export type ChatRequest = {
  model: string;
  fallbacks: string[];
  allow?: string[];
  deny?: string[];
  cacheControl: CacheControl;
  stream: boolean;
  /** A streamed answer ends with the usage (chat's `stream_options.include_usage`; always on wires that always send it). */
  includeUsage: boolean;
  /**
   * Fields of the client's protocol that only its own wire carries: sent when a connection of
   * that wire serves the request as it came (NATIVE_REQUEST), otherwise dropped and named with
   * the candidate's own in X-GW-Params-Dropped and the log.
   */
  nativeOnly?: string[];
};

/** Whether the serving candidate's wire took the request as the client sent it. */
function servedNatively(body: ChatBody, served: Served<unknown>): boolean {
  const native = body[NATIVE_REQUEST];
  return native !== undefined && ADAPTERS[served.candidate.connection.kind].nativeWire === native.wire;
}

/** The candidate's dropped parameters and what could not cross to its wire, named in X-GW-Params-Dropped (spec 4.1). */
function nameDropped(call: Call, request: ChatRequest, served: Served<unknown>): void {
  if (request.nativeOnly?.length && !servedNatively(call.body, served)) served.dropped.push(...request.nativeOnly);
  if (served.dropped.length > 0) call.ctx.set('X-GW-Params-Dropped', served.dropped.join(','));
}

/**
 * The execute deps of a chat call: a call sent and then cut before it answered is charged (the
 * provider worked on it, and may have reasoned to its output cap). Cut by the gateway (a
 * timeout, a deadline, a stall), its usage is never learned: charged its worst case, the prompt
 * and the output cap it was sent with, as the hold priced it (issue 54). Cut by its client
 * leaving: its prompt, estimated as an abandoned stream's is (billedUsage).
 */
export function chatCallDeps(call: Call) {
  const services = call.services;
  return {
    agent: services.agent, catalog: services.catalog, learned: services.learned, defaultTimeoutMs: services.defaultTimeoutMs,
    forceOutputCeiling: call.hold?.scopes.some((s) => s.blocking) ?? false,
    trace: call.ctx.state.trace,
    // The id the call's ledger row is kept under (a decision's retried call has its own).
    requestId: call.callId ?? call.ctx.state.requestId,
    readOnSlot: () => readOnSlot(call.key.orgId),
    onCut(candidate: Served<unknown>['candidate'], by: CutBy) {
      const usage = billedUsage(call.body, null, 0, false);
      const prompt = estimateCost({ usage, kind: candidate.connection.kind, upstreamModel: candidate.upstreamModel, modelId: candidate.modelId, prices: call.config.prices, catalog: services.catalog });
      addCutCost(call, candidate, by === 'gateway' ? atLeastWorstCase(call, candidate, prompt) : prompt);
    },
  };
}

/**
 * A call the gateway cut without learning its usage: `estimate` raised to the candidate's worst
 * case as the hold prices it (an unpriced candidate keeps its estimate, null stays null).
 */
function atLeastWorstCase(call: Call, candidate: Served<unknown>['candidate'], estimate: CostEstimate): CostEstimate {
  if (!estimate) return null;
  let worst = 0;
  try {
    worst = worstCaseCost([candidate], call.body, { prices: call.config.prices, unpricedBudgetPolicy: 'allow' }, call.services.catalog);
  } catch {
    // No price: the estimate stands.
  }
  return { cost: Math.max(estimate.cost, worst), source: estimate.source };
}

export function costOf(call: Call, served: Served<unknown>, usage: Usage | null): CostEstimate {
  // What is priced here is what the spend settles for: the ledger row names it.
  call.servedBy = { provider: served.candidate.connection.kind, model: billedModel(served.candidate) };
  const estimate = estimateCost({
    usage,
    kind: served.candidate.connection.kind,
    upstreamModel: served.candidate.upstreamModel,
    modelId: served.candidate.modelId,
    prices: call.config.prices,
    catalog: call.services.catalog,
  });
  // A priority tier, audio output or web search is never settled as plain text (core/pricing/priced-features.ts).
  const features = priceChangingFeatures(call.body as Record<string, unknown>);
  return changesPrice(features) ? withPriceChangingFeatures(estimate, features, served.candidate.connection.kind, served.candidate.upstreamModel) : estimate;
}

/** One request-log row (spec 4.1), queued off the hot path. */
export function logRequest(call: Call, outcome: {
  status: number;
  served?: Served<unknown>;
  servedModel?: string | null;
  attempts: RequestAttempt[];
  usage?: Usage | null;
  estimate?: CostEstimate;
  error?: GatewayError;
  response?: unknown;
  /** On a cache hit, the answer that was served again. */
  hit?: CachedAnswer;
  /** On a cache hit, what originally served it. */
  cached?: { provider: string; connection: string; position: string };
}): void {
  const capture = call.logging && call.config.promptLoggingEnabled;
  const charged = chargedEstimate(call, outcome.estimate ?? null);
  const row = requestLogRow(call, {
    endpoint: call.endpoint,
    requestedModel: call.body.model,
    routeSlug: call.plan?.route?.slug ?? null,
    servedModel: outcome.servedModel ?? outcome.served?.candidate.upstreamModel ?? null,
    provider: outcome.served?.candidate.connection.kind ?? outcome.cached?.provider ?? null,
    connectionId: outcome.served?.candidate.connection.id ?? outcome.cached?.connection ?? null,
    chainPosition: outcome.served?.position ?? outcome.cached?.position ?? null,
    status: outcome.status,
    errorType: outcome.error?.type ?? null,
    errorCode: outcome.error?.code ?? null,
    stream: call.body.stream === true,
    latencyMs: Math.round(performance.now() - call.started),
    attempts: outcome.attempts,
    usage: outcome.usage ? { ...outcome.usage } : null,
    cost: charged?.cost ?? null,
    priceSource: charged?.source ?? null,
    paramsDropped: outcome.served?.dropped ?? [],
    guardrails: call.guard?.outcome() ?? null,
    // What a guardrail matched is never stored, whatever its rule's action.
    requestBody: capture ? { messages: call.guard?.logMessages ?? call.body.messages } : null,
    responseBody: capture ? (outcome.response ?? null) : null,
    cacheStatus: call.cache?.status ?? null,
    cacheSourceRequestId: outcome.hit?.requestId ?? null,
  });
  if (call.decisionId) Object.assign(row, { decisionId: call.decisionId });
  recordRequestRow(call, row);
}

function refused(call: Call, result: NotServed): never {
  endSpend(call, null);
  logRequest(call, { status: result.error.status, attempts: result.attempts, error: result.error });
  throw result.error;
}

/** Logs the gateway's own refusal (a GatewayError) like any request, and passes every error on. */
function loggedRefusal(call: Call) {
  return (err: unknown): never => {
    if (err instanceof GatewayError) logRequest(call, { status: err.status, attempts: [], error: err });
    throw err;
  };
}

/**
 * Guardrails' input stage (spec 2.6), before the cache, any reservation and any provider: what
 * the rules redact is redacted in what is sent; a block (or a failed detector under
 * `on_engine_error: block`) is a 403 that reached nothing.
 */
export async function guardInput(call: Call): Promise<void> {
  const rules = await call.services.guardrails.rulesFor(call.key);
  if (!rules) return;
  const guard = (call.guard = new RequestGuard(rules, call.key.orgId));
  const { messages, refusal } = await guard.checkInput(call.body.messages);
  call.body.messages = messages;
  guardHeader(call, call.body.stream === true);
  if (refusal) {
    logRequest(call, { status: refusal.status, attempts: [], error: refusal });
    throw refusal;
  }
}

function guardHeader(call: Call, stream: boolean): void {
  const word = call.guard!.header(stream);
  if (word) call.ctx.set('X-GW-Guardrails', word);
  const trace = call.ctx.state.trace;
  if (trace?.recording) traceEvent(trace, 'gw.guardrails', { 'gw.guardrails.action': call.guard!.outcome()?.action ?? 'none' });
  // Names only: a failed detector's error could quote the text it was reading.
  if (call.guard!.skipped.length > 0) call.ctx.state.log?.warn({ detectors: call.guard!.skipped }, 'guardrail detector failed; its policy allows carrying on');
}

/**
 * Output stage on a whole answer: redacted in place, or a 403 instead of it. The provider was
 * called and billed, so a refused answer's spend is settled all the same.
 */
export async function guardAnswer(call: Call, served: Served<ChatResult>, model: string, estimate: CostEstimate) {
  const guard = call.guard!;
  const result = served.value;
  const refusal = await guard.checkAnswer(result.choices);
  guardHeader(call, false);
  if (refusal) {
    logRequest(call, { status: refusal.status, served, servedModel: model, attempts: served.attempts, usage: result.usage, estimate, error: refusal, response: guard.logChoices(result.choices) });
    endSpend(call, estimate);
    throw refusal;
  }
  return guard.field();
}

/** Output stage on a cache hit: redacted in place, or a 403 (nothing was spent on it). */
async function guardCachedAnswer(call: Call, hit: CachedAnswer, stream: boolean): Promise<void> {
  const refusal = await call.guard!.checkAnswer(hit.choices);
  guardHeader(call, stream);
  if (refusal) {
    logRequest(call, { status: refusal.status, servedModel: hit.model, attempts: [], error: refusal, response: call.guard!.logChoices(hit.choices), hit });
    throw refusal;
  }
}

/** The answer's `guardrails` field (spec 2.2), when a guardrail acted. */
function guardrailsOf(call: Call): unknown {
  return call.guard?.field() ?? undefined;
}

/**
 * Output stage on a stream, once it completed: on the assembled text, since what was sent
 * cannot be redacted (a `redact` match counts as flagged). The finish chunks held back go out
 * carrying the finding; a block (or a failed detector that blocks) ends the stream with an
 * error event instead. The provider billed either way, so the spend was settled.
 */
async function guardStreamEnd(call: Call, tally: StreamTally, out: PassThrough, chunk: (model: string, choices: ChunkChoice[]) => string): Promise<GatewayError | null> {
  if (!tally.guarded) return null;
  const refusal = await call.guard!.checkStreamEnd(tally.guarded.texts);
  if (call.guard!.skipped.length > 0) call.ctx.state.log?.warn({ detectors: call.guard!.skipped }, 'guardrail detector failed; its policy allows carrying on');
  if (!refusal) for (const held of tally.guarded.held) out.write(chunk(held.model, held.choices));
  return refusal;
}

function identity(served: Served<unknown>, model: string): AnswerIdentity {
  return { model, route: served.position, provider: served.candidate.connection.kind, connection: served.candidate.connection.id };
}

async function answerWhole(call: Call, served: Served<ChatResult>, wire: ChatWire): Promise<void> {
  const result = served.value;
  const usage = wholeAnswerUsage(call.body, result);
  const estimate = costOf(call, served, usage);
  const model = result.model ?? served.candidate.upstreamModel;
  const guardrails = call.guard && (await guardAnswer(call, served, model, estimate));
  call.ctx.body = wire.whole(call, identity(served, model), result.choices, {
    usage: result.usage,
    estimate: chargedEstimate(call, estimate),
    ...(guardrails && { guardrails }),
    ...(call.cache && { cache: cacheField(call.cache, Date.now()) }),
    ...(result.native && servedNatively(call.body, served) && { native: result.native }),
  });
  logRequest(call, { status: 200, served, servedModel: model, attempts: served.attempts, usage, estimate, response: call.guard?.logChoices(result.choices) ?? result.choices });
  keepAnswer(call, served, model, result.choices, result.usage);
  endSpend(call, estimate);
}

function streamHeaders(ctx: GatewayContext): void {
  ctx.status = 200;
  ctx.type = 'text/event-stream';
  ctx.set('Cache-Control', 'no-cache');
}

/**
 * Streams the answer in the wire's events (spec 4.1, 6.4). If the provider's stream breaks off,
 * the wire's error event ends it, with no completion and no usage. A client that goes away
 * aborts the upstream request. Writes honour backpressure (`relayStream`): a slow client slows
 * the read.
 */
function answerStream(call: Call, served: Served<LiveStream>, wire: ChatWire, includeUsage: boolean, clientGone: AbortSignal): void {
  const { ctx } = call;
  const out = new PassThrough({ highWaterMark: STREAM_HIGH_WATER_MARK });
  streamHeaders(ctx);
  ctx.set('X-Accel-Buffering', 'no');
  ctx.body = out;

  // The answer's text is kept only when the request log will store it.
  const tally: StreamTally = { model: served.candidate.upstreamModel, usage: null, finished: false, outputBytes: 0, text: call.logging && call.config.promptLoggingEnabled ? [] : null };
  // Guardrails that check the answer keep each choice's text and hold its finish chunk to the end.
  if (call.guard?.checksOutput) tally.guarded = { texts: [], held: [] };
  // The answer is assembled for the cache only when this request may write it.
  const assembler = call.cache?.writeTo ? new ChoiceAssembler() : null;
  const encoder = wire.stream(call, identity(served, served.candidate.upstreamModel), includeUsage);
  const chunk = (model: string, choices: ChunkChoice[], native?: NativeEvent) => {
    assembler?.add(choices);
    return encoder.chunk(model, choices, call.guard && choices.some((c) => c.finish_reason) ? guardrailsOf(call) : undefined, native);
  };
  let spendEnded = false;

  const finish = async () => {
    const end = await relayStream(served.value, tally, out, clientGone, chunk);
    // The provider started answering, so it bills a broken or abandoned answer too. Its usage
    // is final once the answer completed, or finished before the stream broke off (an abandoned
    // one is read to its end: relayStream). One the gateway cut (a stall, or its client gone past
    // the bound) without learning its usage is charged its worst case.
    const usage = billedUsage(call.body, tally.usage, tally.outputBytes, end.phase === 'complete' || tally.finished);
    const cut = !tally.finished && (served.value.cutByGateway() || (end.phase === 'gone' && end.cut === true) || (end.phase === 'broken' && end.error.kind === 'stream_stalled'));
    const answered = costOf(call, served, usage);
    const estimate = cut ? atLeastWorstCase(call, served.candidate, answered) : answered;
    spendEnded = true;
    endSpend(call, estimate);
    const refusal = end.phase === 'complete' ? await guardStreamEnd(call, tally, out, chunk) : null;
    if (refusal) {
      out.write(encoder.fail(refusal));
    } else if (end.phase === 'complete') {
      const completion = encoder.complete(tally.model, {
        usage: tally.usage, estimate: chargedEstimate(call, estimate), guardrails: guardrailsOf(call), ...(call.cache && { cache: cacheField(call.cache, Date.now()) }),
      });
      out.write(typeof completion === 'string' ? completion : await completion);
      // Only a complete answer is kept; a cut or abandoned one never is.
      const choices = assembler?.choices();
      if (choices) keepAnswer(call, served, tally.model, choices, tally.usage);
    } else if (end.phase === 'broken') {
      out.write(encoder.fail(end.error));
    }
    out.end();
    logRequest(call, {
      status: refusal ? refusal.status : end.phase === 'complete' ? 200 : end.phase === 'gone' ? 499 : end.error.status,
      served,
      servedModel: tally.model,
      attempts: served.attempts,
      usage,
      estimate,
      error: refusal ?? (end.phase === 'broken' ? end.error : undefined),
      response: call.guard?.logAnswer?.join('') ?? tally.text?.join('') ?? null,
    });
  };
  // Nothing after the answer began may reject unhandled: a defect here is logged, the hold
  // released and the client's stream closed (an answer already ended still reaches it whole).
  finish().catch((err: unknown) => {
    ctx.state.log?.error({ err: errorSummary(err) }, 'stream answer failed');
    if (!spendEnded) endSpend(call, null);
    if (!out.writableEnded) out.destroy();
  });
}

/** Keeps a complete answer for reuse when this request may write the cache. */
function keepAnswer(call: Call, served: Served<unknown>, model: string, choices: Choice[], usage: Usage | null): void {
  storeAnswer(call.services.responseCache, call.cache, {
    requestId: call.ctx.state.requestId,
    storedAt: Date.now(),
    model,
    provider: served.candidate.connection.kind,
    connection: served.candidate.connection.id,
    upstreamModel: served.candidate.upstreamModel,
    route: served.position,
    choices,
    usage,
  }, (err) => call.ctx.state.log?.warn({ err: errorSummary(err) }, 'response cache write failed'));
}

const CACHE_HIT_ESTIMATE = { cost: 0, source: 'gateway_cache' } as CostEstimate;

/**
 * A cache hit (spec 2.2, 8): counted toward the key's rate limit, no budget held, served even
 * when a blocking limit is exhausted. The original usage counts with cost 0 and price source
 * `gateway_cache`; model, provider, connection and route of the original answer, the route name
 * of this request. A streamed request gets the answer replayed as chunks.
 */
async function answerFromCache(call: Call, hit: CachedAnswer, wire: ChatWire, stream: boolean, includeUsage: boolean): Promise<void> {
  const { ctx, key, services } = call;
  if (ctx.state.rateCounted !== true) {
    const window = await meterKey(ctx, services.spendRedis, key);
    ctx.state.rateCounted = true;
    refuseOverRate(key, window);
  }
  // Guardrails' output stage runs on a kept answer too (policies may have changed since); on a
  // replayed stream nothing was sent yet, so here redaction applies to it as to a whole answer.
  if (call.guard) await guardCachedAnswer(call, hit, stream);
  const now = Date.now();
  ctx.set('X-GW-Cache-Age', String(ageSeconds(hit, now)));
  ctx.set('X-GW-Cache-Source', hit.requestId);
  const extras = { usage: hit.usage, estimate: CACHE_HIT_ESTIMATE, guardrails: guardrailsOf(call), cache: cacheField(call.cache!, now) };
  const who: AnswerIdentity = { model: hit.model, route: hit.route, provider: hit.provider, connection: hit.connection };
  if (stream) {
    streamHeaders(ctx);
    const encoder = wire.stream(call, who, includeUsage);
    const events = replayChunks(hit.choices).map((choices) => encoder.chunk(hit.model, choices, call.guard && choices.some((c) => c.finish_reason) ? guardrailsOf(call) : undefined));
    events.push(await encoder.complete(hit.model, extras));
    ctx.body = events.join('');
  } else {
    ctx.body = wire.whole(call, who, hit.choices, extras);
  }
  logRequest(call, {
    status: 200, servedModel: hit.model, attempts: [], usage: hit.usage, estimate: CACHE_HIT_ESTIMATE,
    response: call.guard?.logChoices(hit.choices) ?? hit.choices, hit, cached: { provider: hit.provider, connection: hit.connection, position: hit.route },
  });
}

/**
 * Spec 8: before anything is sent, the worst case (prompt estimate plus output ceiling, priced
 * over every candidate the request may reach) is held in every blocking scope at once, or the
 * request is 402 with that scope's code (api/gateway/spend-step.ts). The key's rate count rides
 * in the same Redis step.
 */
export async function reserveBudget(call: Call): Promise<void> {
  const { config, plan, services } = call;
  if (!plan) return;
  await reserveSpend(call, () => worstCaseCost(plan.candidates, call.body, config, services.catalog), plan.candidates[0]).catch(loggedRefusal(call));
}

/**
 * A whole answer whose client left while it was being made: nobody reads it, but the provider
 * served it, so its cost is settled and the request logged as 499 with its usage and cost.
 */
function settleAbandoned(call: Call, served: Served<ChatResult> | NotServed): void {
  call.ctx.respond = false;
  if (!served.ok) {
    endSpend(call, null);
    logRequest(call, { status: 499, attempts: served.attempts });
    return;
  }
  const usage = wholeAnswerUsage(call.body, served.value);
  const estimate = costOf(call, served, usage);
  endSpend(call, estimate);
  logRequest(call, { status: 499, served, servedModel: served.value.model ?? served.candidate.upstreamModel, attempts: served.attempts, usage, estimate });
}

/** The gateway's extension fields (spec 4.1) as every client protocol's request carries them. */
export type GatewayFields = {
  model: string;
  fallbacks?: string[];
  routing?: { providers?: { allow?: string[]; deny?: string[] } };
  logging?: boolean;
  cache?: unknown;
  stream?: boolean;
};

/**
 * A protocol route's whole part after parsing: the call built from the request's extension
 * fields and the translated body, then served in the route's wire. `answer` says how a stream
 * ends (`includeUsage`) and what only the client's own wire carries (`nativeOnly`). Answers the
 * call, for a route that keeps what was answered (its guardrails say what may be kept).
 */
export async function serveProtocol(ctx: GatewayContext, services: GatewayServices, request: GatewayFields, translated: {
  body: ChatBody;
  attribution: Attribution;
  wire: ChatWire;
  answer: Pick<ChatRequest, 'includeUsage' | 'nativeOnly'>;
  started: number;
}): Promise<ChatCall> {
  const key = ctx.state.key!;
  const cacheControl = parseCacheControl(request.cache, (name) => ctx.get(name));
  const config = await services.orgConfig.get(key.orgId);
  const { body, attribution, wire } = translated;
  const call: Call = { ctx, services, key, config, endpoint: wire.endpoint, plan: null, body, attribution, logging: request.logging !== false, started: translated.started, createdAt: new Date(), hold: null, cache: null };
  await serveChat(call, {
    model: request.model,
    fallbacks: request.fallbacks ?? [],
    allow: request.routing?.providers?.allow,
    deny: request.routing?.providers?.deny,
    cacheControl,
    stream: request.stream === true,
    ...translated.answer,
  }, wire);
  return call;
}

/**
 * Runs a chat call to its answer in `wire`: the plan (the gateway's own refusals logged like any
 * request), guardrails on the prompt, the cache (asked before any budget is held: a hit takes
 * no reservation, spec 8), the reservation, the provider call with failover, the answer.
 */
export async function serveChat(call: Call, request: ChatRequest, wire: ChatWire): Promise<void> {
  const { ctx, services, key, config } = call;
  let cachePolicy: CachePolicy;
  try {
    cachePolicy = resolveCachePolicy(config.responseCache, config.plan, request.cacheControl);
    call.plan = planCandidates({
      model: request.model,
      fallbacks: request.fallbacks,
      allow: request.allow,
      deny: request.deny,
      metadata: routingMetadata(call.attribution),
      key,
      config,
      catalog: services.catalog,
      catalogModelsOnly: true,
    });
  } catch (err) {
    return loggedRefusal(call)(err);
  }
  const plan = call.plan;
  const body = call.body;
  // Guardrails check the prompt first: a blocked one is never served, even from the cache.
  await guardInput(call);
  // What guardrails redact or check is the chat body's: a guarded request is translated, never
  // sent (or answered) in the provider's own wire past them.
  if (call.guard) delete body[NATIVE_REQUEST];
  call.cache = await consultCache(ctx, services.responseCache, key.orgId, cachePolicy, body, call.logging, (hit) => couldHaveServed(plan, hit)).catch(loggedRefusal(call));
  if (call.cache?.hit) return answerFromCache(call, call.cache.hit, wire, request.stream, request.includeUsage);
  await reserveBudget(call);

  // A client that hangs up stops the upstream work it asked for.
  const clientGone = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) clientGone.abort();
  });
  const deps = chatCallDeps(call);

  // A client gone before an answer began is not an error of ours: log it (499) and stop.
  const unlessGone = async <T>(work: Promise<T>): Promise<T | null> => {
    try {
      return await work;
    } catch (err) {
      // A call the client's leaving cut is charged its prompt, one the gateway cut its worst case (deps.onCut).
      endSpend(call, null);
      if (!clientGone.signal.aborted) throw err;
      logRequest(call, { status: 499, attempts: [] });
      ctx.respond = false;
      return null;
    }
  };

  if (request.stream) {
    const served = await unlessGone(startChatStream(plan, body, deps, clientGone.signal));
    if (!served) return;
    // Its client left before an answer began and no attempt answered (none starts after it left).
    if (!served.ok && clientGone.signal.aborted) return settleAbandoned(call, served);
    if (!served.ok) refused(call, served);
    nameDropped(call, request, served);
    answerStream(call, served, wire, request.includeUsage, clientGone.signal);
    return;
  }
  // Once sent, a whole answer is awaited even when its client has left (no signal).
  const served = await unlessGone(completeChat(plan, body, deps, clientGone.signal));
  if (!served) return;
  if (clientGone.signal.aborted) return settleAbandoned(call, served);
  if (!served.ok) refused(call, served);
  nameDropped(call, request, served);
  await answerWhole(call, served, wire);
}
