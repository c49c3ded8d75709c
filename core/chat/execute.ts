import type { Agent } from 'undici';
import type { ModelCatalog } from '../catalog/model-catalog';
import type { RequestAttempt } from '../db/schema';
import { GatewayError } from '../errors';
import { endFailedAttempt, keepServedAttempt, startAttemptSpan } from '../observability/attempt-spans';
import type { RequestTrace } from '../observability/tracing';
import { ADAPTERS } from '../providers/adapters';
import { sendUpstream, type UpstreamSuccess } from '../providers/upstream';
import { NATIVE_REQUEST, type ChatBody, type ChatResult, type ProviderAdapter, type ProviderFailure, type StreamOutput } from '../providers/types';
import { chainPosition, type Candidate, type Plan } from '../routing/candidates';
import { attemptRecord, finalError, type FailedAttempt } from './outcome';
import { isDroppable, prepareBody, type LearnedParams } from './prepare';
import { readSse } from './sse';

export type ExecuteDeps = {
  agent: Agent; catalog: ModelCatalog; learned: LearnedParams; defaultTimeoutMs: number;
  /** A blocking budget applies: cap every candidate's output. */
  forceOutputCeiling?: boolean;
  /**
   * Told of each call that was sent and then cut before it answered: by the gateway (our
   * timeout before a retry or failover, a deadline's abort, a stream stalled before its first
   * token) or by its client (gone before the first token). The provider works on, and bills,
   * what it was sent, so the caller settles an estimate of it.
   */
  onCut?(candidate: Candidate, by: CutBy): void;
  /** A slot to read on one stream whose client left (core/chat/read-on.ts), or null past the organization's cap. */
  readOnSlot?(): (() => void) | null;
  /** The request's trace, when traced: each attempt is a client span of it. */
  trace?: RequestTrace;
  /** The gateway request id, told to the provider with each call (UpstreamTarget.requestId). */
  requestId?: string;
};

/** Who cut a call: the gateway (its usage is never learned) or the client, by leaving. */
export type CutBy = 'gateway' | 'client';

export type Served<T> = { ok: true; candidate: Candidate; position: string; dropped: string[]; attempts: RequestAttempt[]; value: T };
export type NotServed = { ok: false; error: GatewayError; attempts: RequestAttempt[] };

export type TryResult<T> = { ok: true; value: T } | { ok: false; failure: ProviderFailure };

/** A started stream: what arrived up to the first token, and an iterator over the rest. */
export type LiveStream = {
  buffered: StreamOutput[]; rest: AsyncGenerator<StreamOutput[]>; abort(): void;
  /** Whether the gateway cut it while its client was gone (CLIENT_GONE_READ_MS passed): its usage is not known. */
  cutByGateway(): boolean;
};

/**
 * How long a stream is read on after its client left (issue 54): the provider finishes the
 * answer, reasoning included, and bills it whether or not anyone reads it, so the gateway reads
 * it to its end to learn the usage it reports, within this bound. Past it the gateway cuts the
 * call, and charges its worst case. No new attempt starts once the client has left.
 */
export const CLIENT_GONE_READ_MS = 10 * 60_000;

/** What walking a plan ends with when a candidate served: the walker's part, without chat's `dropped`. */
export type Walked<T> = { ok: true; candidate: Candidate; position: string; attempts: RequestAttempt[]; value: T };

export type WalkOptions = {
  /** Candidates known up front not to take the request: skipped with no call and no attempt. */
  skip?: (candidate: Candidate, index: number) => boolean;
  /** Whether a failure is worth the same candidate once more outside the route's retries (a dropped parameter). */
  tryAgain?: (candidate: Candidate, failure: ProviderFailure) => boolean;
  /** Once aborted (the client left), no further attempt is sent: the walk ends not served, with the attempts made. */
  stop?: AbortSignal;
  /** The request's trace, when traced: each attempt is a client span of it. */
  trace?: RequestTrace;
};

/**
 * Walks the plan's candidates in order (spec 7, retry rules), for every endpoint: per failure
 * kind the route's action, `retry` (the same candidate again, up to `max_retries`), `failover`
 * (the next one) or `stop` (no further tries). A provider's 400 moves on without retrying.
 * `attempt` decides what counts as served, so failover happens only before any output was sent.
 */
export async function walkPlan<T>(
  plan: Plan,
  attempt: (candidate: Candidate) => Promise<TryResult<T>>,
  options: WalkOptions = {},
): Promise<Walked<T> | NotServed> {
  const attempts: RequestAttempt[] = [];
  const failures: FailedAttempt[] = [];
  // An unsampled request's attempts make no spans (RequestTrace.recording).
  const traced = options.trace?.recording ? options.trace : undefined;
  for (const [index, candidate] of plan.candidates.entries()) {
    if (options.skip?.(candidate, index)) continue;
    const position = chainPosition(index);
    let retries = 0;
    for (;;) {
      if (options.stop?.aborted) return { ok: false, error: finalError(failures), attempts };
      const started = performance.now();
      const span = traced && startAttemptSpan(traced, candidate, position);
      let result: TryResult<T>;
      try {
        result = await attempt(candidate);
      } catch (err) {
        if (span) endFailedAttempt(span, 'exception', null);
        throw err;
      }
      if (result.ok) {
        attempts.push(attemptRecord(candidate, position, 'ok', 200, started));
        if (span) keepServedAttempt(traced, candidate, span, result.value);
        return { ok: true, candidate, position, attempts, value: result.value };
      }
      const { failure } = result;
      attempts.push(attemptRecord(candidate, position, failure.kind, failure.status ?? null, started));
      if (span) endFailedAttempt(span, failure.kind, failure.status ?? null);
      if (options.tryAgain?.(candidate, failure)) continue;
      failures.push({ candidate, failure });
      if (failure.kind === 'invalid_request' || failure.kind === 'unsupported_parameter' || failure.kind === 'model_not_served') break;
      const action = plan.failover[failure.kind];
      if (action === 'stop') return { ok: false, error: finalError(failures), attempts };
      if (action === 'retry' && retries < plan.maxRetries) {
        retries += 1;
        continue;
      }
      break;
    }
  }
  return { ok: false, error: finalError(failures), attempts };
}

/**
 * A chat request's walk: a sampling parameter the model refuses is dropped and the same
 * candidate tried once more (learned for next time).
 *
 * A parameter a candidate's wire has no equivalent for (`adapter.refusal`, spec 4.1) is known
 * before any call, so it is checked up front over the whole plan: such candidates are skipped
 * (no call, no attempt; the next one keeps its chain position), and when every candidate
 * refuses, the request is a 400 invalid_request_error naming the first candidate's parameter.
 */
async function runPlan<T>(
  plan: Plan,
  body: ChatBody,
  deps: ExecuteDeps,
  attempt: (candidate: Candidate, adapter: ProviderAdapter, prepared: ReturnType<typeof prepareBody>) => Promise<TryResult<T>>,
  stop?: AbortSignal,
): Promise<Served<T> | NotServed> {
  const prepare = (c: Candidate) => prepareBody(body, c.connection.kind, c.upstreamModel, ADAPTERS[c.connection.kind], deps.catalog, deps.learned.get(c.connection, c.upstreamModel), deps.forceOutputCeiling, c.connection.config);
  // Each candidate's body is prepared once, here, and sent as prepared unless its connection
  // learned a refusal since (then it is prepared again, without the refused parameter).
  const preparedBodies = plan.candidates.map(prepare);
  const refusals = plan.candidates.map((c, i) => ADAPTERS[c.connection.kind].refusal(preparedBodies[i]!.body, c.upstreamModel));
  const first = refusals[0];
  if (first && refusals.every(Boolean)) return { ok: false, error: new GatewayError('invalid_request', first.message, { details: { param: first.param } }), attempts: [] };
  const relearned = new Set<Candidate>();
  let dropped: string[] = [];
  const walked = await walkPlan(plan, (candidate) => {
    const index = plan.candidates.indexOf(candidate);
    const prepared = relearned.has(candidate) ? prepare(candidate) : preparedBodies[index]!;
    dropped = prepared.dropped;
    return attempt(candidate, ADAPTERS[candidate.connection.kind], prepared);
  }, {
    stop,
    trace: deps.trace,
    skip: (_, index) => refusals[index] !== null,
    tryAgain(candidate, failure) {
      if (failure.kind !== 'unsupported_parameter' || !isDroppable(failure.param) || relearned.has(candidate)) return false;
      deps.learned.learn(candidate.connection, candidate.upstreamModel, failure.param);
      relearned.add(candidate);
      return true;
    },
  });
  return walked.ok ? { dropped, ...walked } : walked;
}

function timeoutFor(plan: Plan, candidate: Candidate, deps: Pick<ExecuteDeps, 'defaultTimeoutMs'>): number {
  return plan.timeoutMs ?? candidate.connection.timeoutMs ?? deps.defaultTimeoutMs;
}

/** Where one candidate is called: its hosts, pooled credentials and the timeout that applies. */
export function upstreamTarget(plan: Plan, candidate: Candidate, deps: Pick<ExecuteDeps, 'defaultTimeoutMs' | 'requestId'>) {
  const c = candidate.connection;
  return { kind: c.kind, baseUrls: [c.baseUrl, ...c.alternateBaseUrls], secrets: c.secrets, timeoutMs: timeoutFor(plan, candidate, deps), requestId: deps.requestId };
}

/**
 * A whole answer from the first candidate that gives one. A chat call once sent is never
 * aborted: it is awaited even when its client has left, since the provider bills it whether or
 * not anyone reads it, and its reported usage is then settled rather than guessed. `stop` only
 * keeps the walk from sending another one (WalkOptions). `abort` does cut the call in flight
 * (a decision's deadline): the promise then rejects with the signal's reason.
 */
export function completeChat(plan: Plan, body: ChatBody, deps: ExecuteDeps, stop?: AbortSignal, abort?: AbortSignal): Promise<Served<ChatResult> | NotServed> {
  return runPlan(plan, body, deps, async (candidate, adapter, prepared): Promise<TryResult<ChatResult>> => {
    const upstream = adapter.buildRequest(prepared.body, { model: candidate.upstreamModel, stream: false, defaultMaxTokens: prepared.defaultMaxTokens, config: candidate.connection.config });
    const sending = !abort?.aborted;
    try {
      const sent = await sendUpstream(deps.agent, adapter, upstreamTarget(plan, candidate, deps), upstream, abort);
      if (!sent.ok) {
        if (sent.failure.kind === 'timeout') deps.onCut?.(candidate, 'gateway');
        return sent;
      }
      try {
        return { ok: true, value: adapter.parseResponse(await sent.body.json(), sentNatively(prepared.body, adapter) ? NATIVE : undefined) };
      } catch (err) {
        if (abort?.aborted) throw err;
        return { ok: false, failure: { kind: 'server_error', message: `unreadable answer: ${(err as Error).message}` } };
      }
    } catch (err) {
      // Aborted (a deadline) after it was sent: the provider was already working on it.
      if (sending && abort?.aborted) deps.onCut?.(candidate, 'gateway');
      throw err;
    }
  }, stop);
}

const NATIVE = { native: true } as const;

/** Whether the adapter sent the client's own request (its wire is the one the request came in). */
function sentNatively(body: ChatBody, adapter: ProviderAdapter): boolean {
  const native = body[NATIVE_REQUEST];
  return native !== undefined && native.wire === adapter.nativeWire;
}

const startsAnswer = (o: StreamOutput) => o.type === 'delta' && o.choices.some((c) => c.delta.content || c.delta.tool_calls?.length || c.finish_reason);

async function* decodeStream(sent: UpstreamSuccess, adapter: ProviderAdapter, native: boolean): AsyncGenerator<StreamOutput[]> {
  const decode = adapter.createStreamDecoder(native ? NATIVE : undefined);
  for await (const event of readSse(sent.body)) {
    const outputs = decode(event);
    if (outputs.length > 0) yield outputs;
  }
}

/**
 * A stream from the first candidate that starts one: failover is possible until the first
 * token arrives (spec 7 rule 5), so events are held back until then.
 */
export function startChatStream(plan: Plan, body: ChatBody, deps: ExecuteDeps, signal: AbortSignal): Promise<Served<LiveStream> | NotServed> {
  return runPlan(plan, body, deps, async (candidate, adapter, prepared): Promise<TryResult<LiveStream>> => {
    const upstream = adapter.buildRequest(prepared.body, { model: candidate.upstreamModel, stream: true, defaultMaxTokens: prepared.defaultMaxTokens, config: candidate.connection.config });
    // The candidate's own signal: aborted when it is given up on, or when its client has been
    // gone for CLIENT_GONE_READ_MS (read on until then: the provider bills the whole answer).
    const own = new AbortController();
    let bound: NodeJS.Timeout | undefined;
    let boundPassed = false;
    let slot: (() => void) | null | undefined;
    const onGone = () => {
      // Past the organization's cap on streams read on, cut at once (its worst case is charged).
      slot = deps.readOnSlot ? deps.readOnSlot() : () => undefined;
      if (!slot) {
        boundPassed = true;
        own.abort(signal.reason);
        return;
      }
      bound = setTimeout(() => {
        boundPassed = true;
        own.abort(signal.reason);
        // The socket is let go with the abort, whether or not anyone reads the stream's end.
        slot?.();
        slot = null;
      }, CLIENT_GONE_READ_MS);
      bound.unref();
    };
    if (signal.aborted) own.abort(signal.reason);
    else signal.addEventListener('abort', onGone, { once: true });
    // Once the attempt is over, whichever way: no bound is armed for it, nor a slot held, any more.
    const release = () => {
      signal.removeEventListener('abort', onGone);
      clearTimeout(bound);
      slot?.();
      slot = null;
    };
    const sending = !signal.aborted;
    let sent: Awaited<ReturnType<typeof sendUpstream>>;
    try {
      sent = await sendUpstream(deps.agent, adapter, upstreamTarget(plan, candidate, deps), upstream, own.signal);
    } catch (err) {
      release();
      // Cut while the provider was thinking, its client gone: the bound passed (the gateway cut it) or the call broke.
      if (sending && signal.aborted) deps.onCut?.(candidate, boundPassed ? 'gateway' : 'client');
      throw err;
    }
    if (!sent.ok) {
      release();
      if (sent.failure.kind === 'timeout') deps.onCut?.(candidate, 'gateway');
      return sent;
    }
    const rest = released(decodeStream(sent, adapter, sentNatively(prepared.body, adapter)), release);
    const buffered: StreamOutput[] = [];
    // A candidate given up on before its first token must not keep its pooled socket.
    const giveUp = (failure: ProviderFailure): TryResult<LiveStream> => {
      own.abort();
      void rest.return(undefined).catch(() => undefined);
      return { ok: false, failure };
    };
    try {
      for (;;) {
        const next = await rest.next();
        if (next.done) return giveUp({ kind: 'server_error', message: 'the stream ended before the first token' });
        const error = next.value.find((o) => o.type === 'error');
        if (error && error.type === 'error') return giveUp(error.failure);
        buffered.push(...next.value);
        if (next.value.some(startsAnswer)) return { ok: true, value: { buffered, rest, abort: () => own.abort(), cutByGateway: () => boundPassed } };
      }
    } catch (err) {
      own.abort();
      release();
      const code = (err as { code?: string }).code;
      // undici's body timeout: the stream stalled, and the gateway cut it.
      const stalled = code === 'UND_ERR_BODY_TIMEOUT';
      if (signal.aborted) {
        // Its client gone, the call stalled or passed the bound: the gateway cut it, its usage unknown.
        deps.onCut?.(candidate, boundPassed || stalled ? 'gateway' : 'client');
        throw err;
      }
      if (stalled) {
        deps.onCut?.(candidate, 'gateway');
        return { ok: false, failure: { kind: 'timeout', message: 'the stream stalled before the first token' } };
      }
      return { ok: false, failure: { kind: 'connection', message: `the stream broke before the first token (${code ?? (err as Error).message})` } };
    }
  }, signal);
}

/** `rest`, calling `release` once it ends, whichever way (the bound's timer is not kept past the stream). */
async function* released<T>(rest: AsyncGenerator<T>, release: () => void): AsyncGenerator<T> {
  try {
    yield* rest;
  } finally {
    release();
  }
}
