import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { ApplicationFailure } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import { and, between, eq, sql } from 'drizzle-orm';
import { FormData } from 'undici';
import type { Agent } from 'undici';
import type { Readable } from 'node:stream';
import type { NativeBatchServices } from '../api/native-batch-services';
import { jsonlLines } from '../core/batches/jsonl-reader';
import { anthropicRequest, nativeResult, nativeStatus, openAIInputLine, providerEndpoint, type NativeBatchState, type NativeResult, type NativeStatus } from '../core/batches/native-wire';
import type { Clock } from '../core/clock';
import type { Sealer } from '../core/crypto/sealing';
import type { Database } from '../core/db/client';
import { batches, batchItems, providerConnections, type BatchItemOutcome } from '../core/db/schema';
import { cleanProviderText } from '../core/providers/errors';
import { ADAPTERS } from '../core/providers/adapters';
import { isProviderKind } from '../core/providers/kinds';
import { openConnection } from '../core/providers/open-connection';
import { sendUpstream, type UpstreamTarget } from '../core/providers/upstream';
import type { ProviderFailure, UpstreamRequest } from '../core/providers/types';
import type { RedisClient } from '../core/redis';
import { closeJobSpend, endJobHold } from '../core/spend/job-spend';
import { toNanos } from '../core/spend/money';
import { newId } from '../core/ids';
import type { RequestAttribution } from '../core/attribution/request-attribution';
import { requestLogInsert, type RequestLogEntry } from '../core/request-log/writer';
import type { OutputStorage } from '../core/storage/output-storage';
import type { BatchEnding, BatchRefusal } from '../workflows/definitions';
import { batchInputReaders, type LoadedBatch } from './batch-input';
import { beatingThroughout } from './heartbeats';

export type NativeBatchDeps = {
  db: Database;
  storage: OutputStorage;
  clock: Clock;
  sealer: Sealer;
  agent: Agent;
  /** Where the parts' holds end (SPEND_REDIS_URL's Redis, else the main one). */
  spendRedis: RedisClient;
  native: NativeBatchServices;
  /** Cost-center attribution of the items' request-log rows (issue 23), as the request log's writer does it. */
  attribution: Pick<RequestAttribution, 'attributeRows'>;
  /** Where the provider's input file is written before its upload (GW_DATA_DIR's spool). */
  scratchDir?: string;
};

/**
 * `awaitNativeBatch`'s failure while the provider's batch runs: retryable, each attempt's
 * `nextRetryDelay` the wait before the next status check, so the activity retry policy carries
 * the polling (the video jobs' pattern) and the Temporal UI shows the provider's status.
 */
export const NATIVE_BATCH_RUNNING = 'NativeBatchRunning';
/** The provider refused the batch or its connection for good: the batch fails with these words. */
export const NATIVE_BATCH_REFUSED = 'NativeBatchRefused';

/** Provider calls of a native batch wait this long for an answer to begin (an upload of 200 MB takes a while). */
const NATIVE_CALL_TIMEOUT_MS = 10 * 60_000;
/** A status check or a cancel waits this long: two fit well inside the check activity's time. */
const CHECK_CALL_TIMEOUT_MS = 60_000;
/** The answer of an item a completed provider batch left out of its results, in the batch's wire. */
const MISSING_MESSAGE = 'The provider completed the batch without an answer for this request, or with one the gateway could not read. It may have been billed.';
const missingAnswer = (wire: LoadedBatch['wire']) => (wire === 'anthropic'
  ? { type: 'error', error: { type: 'api_error', message: MISSING_MESSAGE, code: 'batch_item_missing' } }
  : { error: { message: MISSING_MESSAGE, type: 'upstream_error', code: 'batch_item_missing' } });

/** Results recorded a transaction at a time. */
const RECORD_ROWS = 200;

/** A part's hold, one per chunk of items: a job hold in the spend ledger (core/spend/job-spend.ts). */
export const partHoldId = (batchId: string, part: number) => `${batchId}.p${part}`;

const refused = (message: string) => ApplicationFailure.nonRetryable(message, NATIVE_BATCH_REFUSED);

/** Failures that say nothing final: the call is made again (by the activity's retry policy). */
const TRANSIENT = new Set<ProviderFailure['kind']>(['timeout', 'server_error', 'rate_limit', 'connection']);

function providerRefusal(what: string, failure: ProviderFailure): Error {
  const status = failure.status ? ` (HTTP ${failure.status})` : '';
  const text = `The provider refused ${what}${status}: ${cleanProviderText(failure.message).slice(0, 500)}`;
  return TRANSIENT.has(failure.kind) ? ApplicationFailure.retryable(text, 'NativeBatchCallFailed') : refused(text);
}

/** An errored answer's type and code, as either wire words them (OpenAI `error.{type,code}`, Anthropic `error.error.type`). */
function errorOf(body: unknown): { type: string | null; code: string | null } {
  const error = (body as { error?: { type?: unknown; code?: unknown; error?: { type?: unknown } } } | null)?.error;
  const type = typeof error?.type === 'string' && error.type !== 'error' ? error.type : typeof error?.error?.type === 'string' ? error.error.type : null;
  return { type, code: typeof error?.code === 'string' ? error.code : null };
}

const servedModelOf = (body: unknown) => {
  const model = (body as { model?: unknown } | null)?.model;
  return typeof model === 'string' ? model : null;
};

/** The request log's name of each endpoint, as the request path logs it. */
const LOGGED_ENDPOINT: Record<string, string> = { '/v1/chat/completions': 'chat.completions', '/v1/embeddings': 'embeddings', '/v1/messages': 'messages' };

/** An item recorded as an error without an answer from the provider. */
type ErroredRow = { line: number; customId: string; attempts: number; statusCode: number; body: unknown };

type Target = { target: UpstreamTarget; query: Record<string, string> | undefined; azure: boolean };

export function createNativeBatchActivities(deps: NativeBatchDeps) {
  const { loadBatch, chunkItems, chunkStart, itemsBefore } = batchInputReaders(deps);

  async function stateOf(batch: LoadedBatch): Promise<NativeBatchState> {
    if (!batch.native) throw refused(`batch ${batch.id} is not run natively`);
    return batch.native;
  }

  async function saveState(batchId: string, changes: Partial<NativeBatchState>): Promise<void> {
    await deps.db.update(batches).set({ native: sql`${batches.native} || ${JSON.stringify(changes)}::jsonb`, updatedAt: deps.clock.now() }).where(eq(batches.id, batchId));
  }

  async function targetOf(batch: LoadedBatch, state: NativeBatchState): Promise<Target> {
    const [row] = await deps.db.select().from(providerConnections).where(and(eq(providerConnections.orgId, batch.orgId), eq(providerConnections.id, state.plan.connectionId)));
    if (!row || !isProviderKind(row.kind)) throw refused(`The connection ${state.plan.connectionId} the batch was sent through is gone.`);
    const opened = openConnection(row, deps.sealer);
    if (opened.secrets.length === 0) throw refused(`The connection ${row.id} has no usable credential.`);
    const azure = row.kind === 'azure_openai';
    return {
      target: { kind: row.kind, baseUrls: [opened.baseUrl, ...row.alternateBaseUrls], secrets: opened.secrets, timeoutMs: NATIVE_CALL_TIMEOUT_MS },
      query: azure ? { 'api-version': typeof row.config.api_version === 'string' ? row.config.api_version : '2024-10-21' } : undefined,
      azure,
    };
  }

  /**
   * One call to the provider. `timeoutMs`: how long its answer may take to begin (a status check
   * or cancel a minute; an upload or a results file ten). `onRefused` runs when the provider
   * surely saw nothing or answered no (the failure is not outcome-unknown), before the throw.
   */
  async function call(t: Target, what: string, request: UpstreamRequest, options: { timeoutMs?: number; onRefused?: () => Promise<void> } = {}): Promise<Readable & { json(): Promise<unknown>; text(): Promise<string> }> {
    const target = options.timeoutMs ? { ...t.target, timeoutMs: options.timeoutMs } : t.target;
    const answer = await sendUpstream(deps.agent, ADAPTERS[t.target.kind], target, { ...request, ...(t.query && { query: { ...t.query, ...request.query } }) });
    if (!answer.ok) {
      if (options.onRefused && !('outcomeUnknown' in answer.failure && answer.failure.outcomeUnknown)) await options.onRefused();
      throw providerRefusal(what, answer.failure);
    }
    return answer.body as unknown as Readable & { json(): Promise<unknown>; text(): Promise<string> };
  }

  /** The provider's batch is created once: the intent is recorded first, and cleared when the provider surely did not take it. */
  async function createOnce(batchId: string, t: Target, request: UpstreamRequest): Promise<string> {
    await saveState(batchId, { submitting: true });
    const notTaken = () => saveState(batchId, { submitting: false });
    let created: { id?: unknown };
    try {
      created = await (await call(t, 'the batch', { ...request, sendOnce: true }, { onRefused: notTaken })).json() as { id?: unknown };
    } catch (err) {
      // The answer began but could not be read: the provider may have taken the batch.
      if (err instanceof SyntaxError) throw refused('The provider\'s answer to the batch could not be read; it may have taken the batch, so it was not sent again.');
      throw err;
    }
    if (typeof created.id !== 'string') throw refused('The provider answered the batch without an id; it may have taken it, so it was not sent again.');
    return created.id;
  }

  /** Where the held parts end: the first line of the first refused part (null: every part is held). */
  async function heldBoundary(batch: LoadedBatch, heldParts: number): Promise<number | null> {
    return (await chunkStart(batch, heldParts))?.line ?? null;
  }

  /**
   * Holds each part's worst case in turn (a part is a chunk of items); the first part a limit has
   * no room for, and every part after it, is refused with that limit's answer. Done once: the
   * count of held parts is recorded.
   */
  async function holdParts(batch: LoadedBatch, state: NativeBatchState): Promise<{ heldParts: number; refusal: BatchRefusal | null }> {
    if (state.heldParts !== undefined) return { heldParts: state.heldParts, refusal: state.refusal ?? null };
    let heldParts = 0;
    let refusal: BatchRefusal | null = null;
    const windowMs = batch.expiresAt.getTime() - batch.createdAt.getTime();
    for (let part = 0; part < (batch.chunkCount ?? 0); part += 1) {
      const items = await chunkItems(batch, part);
      refusal = await deps.native.hold({ holdId: partHoldId(batch.id, part), keyId: batch.keyId, plan: state.plan, bodies: items.map((i) => i.body), leaseMs: windowMs + 3_600_000 });
      if (refusal) break;
      heldParts = part + 1;
    }
    await saveState(batch.id, { heldParts, refusal });
    return { heldParts, refusal };
  }

  /** Uploads the held items as the provider's input file and creates its batch; answers its id. */
  async function createOpenAIBatch(batch: LoadedBatch, state: NativeBatchState, t: Target, boundary: number | null): Promise<string> {
    const scratchRoot = deps.scratchDir ?? os.tmpdir();
    await fs.promises.mkdir(scratchRoot, { recursive: true });
    const file = path.join(scratchRoot, `${batch.id}-native-${process.pid}-${Date.now()}.jsonl`);
    try {
      const out = fs.createWriteStream(file);
      for await (const item of itemsBefore(batch, boundary)) {
        if (!out.write(`${openAIInputLine(item.line, item.body, state.plan.upstreamModel, batch.endpoint, t.azure)}\n`)) await once(out, 'drain');
      }
      out.end();
      await once(out, 'close');
      const form = new FormData();
      form.set('purpose', 'batch');
      form.set('file', await fs.openAsBlob(file, { type: 'application/jsonl' }), `${batch.id}.jsonl`);
      const uploaded = await (await call(t, 'the batch input file', { path: '/files', body: form })).json() as { id?: unknown };
      if (typeof uploaded.id !== 'string') throw refused('The provider answered the input file upload without an id.');
      await saveState(batch.id, { providerInputFileId: uploaded.id });
      return await createOnce(batch.id, t, {
        path: '/batches',
        body: { input_file_id: uploaded.id, endpoint: providerEndpoint(batch.endpoint, t.azure), completion_window: '24h', metadata: { gateway_batch_id: batch.id } },
      });
    } finally {
      await fs.promises.rm(file, { force: true });
    }
  }

  async function createAnthropicBatch(batch: LoadedBatch, state: NativeBatchState, t: Target, boundary: number | null): Promise<string> {
    const requests: Record<string, unknown>[] = [];
    for await (const item of itemsBefore(batch, boundary)) requests.push(anthropicRequest(item.line, item.body, state.plan.upstreamModel));
    return createOnce(batch.id, t, { path: '/messages/batches', body: { requests } });
  }

  /** A results file's lines, in the provider's order; null for a line that is not a result we can read. */
  async function* resultsOf(t: Target, wire: NativeBatchState['plan']['wire'], request: UpstreamRequest): AsyncGenerator<NativeResult | null> {
    const body = await call(t, 'the batch results', { ...request, method: 'GET' });
    for await (const { text } of jsonlLines(body)) {
      if (text.trim() === '') continue;
      yield nativeResult(wire, text);
    }
  }

  /**
   * Records answered items (each once) with their costs at batch rates, logs each in the request
   * log (with the batch's id, its usage and cost, in the hourly rollups) in the same transaction,
   * and moves the batch's counts by what was recorded now. A second read of the same results
   * records and logs nothing again.
   */
  async function record(batch: LoadedBatch, state: NativeBatchState, answers: Array<Extract<NativeResult, { answered: true }>>, customIds: Map<number, string>): Promise<void> {
    const now = deps.clock.now();
    const { plan } = state;
    const priced = await Promise.all(answers.filter((a) => customIds.has(a.line)).map(async (a) => {
      const outcome: BatchItemOutcome = a.status >= 200 && a.status < 300 ? 'succeeded' : 'errored';
      const price = outcome === 'succeeded' ? await deps.native.price({ orgId: batch.orgId, plan, body: a.body }) : { cost: null, source: null, usage: null };
      // The answer carries its cost as every gateway answer does (`usage.cost`).
      const body = price.cost !== null && typeof a.body === 'object' && a.body !== null && typeof (a.body as { usage?: unknown }).usage === 'object'
        ? { ...(a.body as Record<string, unknown>), usage: { ...(a.body as { usage: Record<string, unknown> }).usage, cost: price.cost } } : a.body;
      const requestId = newId('req');
      const error = outcome === 'errored' ? errorOf(a.body) : null;
      const log: RequestLogEntry = {
        id: requestId, orgId: batch.orgId, keyId: batch.keyId, projectId: batch.projectId, endpoint: LOGGED_ENDPOINT[batch.endpoint] ?? batch.endpoint,
        requestedModel: plan.model, routeSlug: plan.routeSlug ?? null, servedModel: servedModelOf(a.body) ?? plan.upstreamModel, provider: plan.kind, connectionId: plan.connectionId,
        chainPosition: 'primary', status: a.status, errorType: error?.type ?? null, errorCode: error?.code ?? null, stream: false, latencyMs: 0,
        usage: price.usage as Record<string, unknown> | null, cost: price.cost, priceSource: price.source, batchId: batch.id, createdAt: now,
      };
      const item = { batchId: batch.id, line: a.line, customId: customIds.get(a.line)!, outcome, attempts: 1, statusCode: a.status, requestId, body, costNanos: price.cost === null ? 0 : toNanos(price.cost) };
      return { item, log };
    }));
    if (priced.length === 0) return;
    await deps.attribution.attributeRows(priced.map((p) => p.log));
    await deps.db.transaction(async (tx) => {
      const inserted = await tx.insert(batchItems).values(priced.map((p) => p.item)).onConflictDoNothing().returning({ line: batchItems.line, outcome: batchItems.outcome, costNanos: batchItems.costNanos });
      if (inserted.length === 0) return;
      const lines = new Set(inserted.map((r) => r.line));
      await tx.execute(requestLogInsert(priced.filter((p) => lines.has(p.item.line)).map((p) => p.log)));
      const completed = inserted.filter((r) => r.outcome === 'succeeded').length;
      const cost = inserted.reduce((sum, r) => sum + (r.costNanos ?? 0), 0);
      await tx.update(batches).set({
        completed: sql`${batches.completed} + ${completed}`, failed: sql`${batches.failed} + ${inserted.length - completed}`,
        costNanos: sql`${batches.costNanos} + ${cost}`, updatedAt: sql`now()`,
      }).where(eq(batches.id, batch.id));
    });
  }

  /**
   * Ends each held part's hold: `settle` at its items' recorded costs; `held` at what it holds
   * (the provider may have run and billed items whose answers the gateway never read: the
   * reservation is the honest upper bound, as for a video render whose end was not seen);
   * `release` when nothing reached the provider.
   */
  async function endHolds(batch: LoadedBatch, state: NativeBatchState, mode: 'settle' | 'held' | 'release'): Promise<void> {
    // Every chunk, not only the parts recorded held: an attempt lost while holding may have held
    // more before it could record how many (a part never held has no row, and ends as a no-op).
    for (let part = 0; part < Math.max(state.heldParts ?? 0, batch.chunkCount ?? 0); part += 1) {
      const holdId = partHoldId(batch.id, part);
      const now = deps.clock.now();
      const served = { provider: state.plan.kind, model: state.plan.upstreamModel };
      if (mode === 'settle') {
        const from = (await chunkStart(batch, part))?.line ?? 0;
        const to = Math.min(((await chunkStart(batch, part + 1))?.line ?? Number.MAX_SAFE_INTEGER) - 1, 2_147_483_647);
        const [{ nanos } = { nanos: 0 }] = await deps.db.select({ nanos: sql<number>`coalesce(sum(${batchItems.costNanos}), 0)::bigint` }).from(batchItems)
          .where(and(eq(batchItems.batchId, batch.id), between(batchItems.line, from, to)));
        await closeJobSpend(deps.db, holdId, { cost: Number(nanos) / 1e9, ...served }, now);
      } else {
        await closeJobSpend(deps.db, holdId, mode === 'held' ? { held: true, ...served } : 'released', now);
      }
      await endJobHold(deps.db, deps.spendRedis, holdId);
    }
  }

  /** The provider batch's own path: `/batches/<id>` (OpenAI, Azure) or `/messages/batches/<id>` (Anthropic). */
  const providerPath = (state: NativeBatchState) => `${state.plan.wire === 'openai' ? '/batches' : '/messages/batches'}/${encodeURIComponent(state.providerBatchId!)}`;

  /** One status check of a provider batch (awaitNativeBatch). */
  async function checkOnce(input: { batchId: string; checkEveryMs: number }): Promise<NativeStatus> {
    const batch = await loadBatch(input.batchId);
    const state = await stateOf(batch);
    const t = await targetOf(batch, state);
    const base = providerPath(state);
    const now = deps.clock.now().getTime();
    if (!state.cancelSent) {
      const stop = batch.status === 'cancelling' ? 'cancelled' : now >= batch.expiresAt.getTime() ? 'expired' : null;
      if (stop) {
        await askToCancel(t, state);
        await saveState(batch.id, { cancelSent: stop });
      }
    }
    const status = nativeStatus(state.plan.wire, await (await call(t, 'a status check of the batch', { method: 'GET', path: base }, { timeoutMs: CHECK_CALL_TIMEOUT_MS })).json());
    if (status.status !== state.providerStatus || status.done !== state.providerDone) await saveState(batch.id, { providerStatus: status.status, providerDone: status.done });
    if (status.ended) return status;
    // A provider that has not ended its batch well past the window (it was asked to cancel at
    // the window's end) is not waited on for ever: the batch fails, its holds kept as charged.
    const windowMs = batch.expiresAt.getTime() - batch.createdAt.getTime();
    if (now >= batch.expiresAt.getTime() + windowMs / 24) throw refused(`The provider had not ended its batch an hour past the completion window (it was ${status.status}).`);
    // Waiting is not an error: logged at DEBUG by the SDK, not counted as a failed activity.
    throw ApplicationFailure.create({ type: NATIVE_BATCH_RUNNING, category: ApplicationFailureCategory.BENIGN, message: `the provider's batch ${state.providerBatchId} is ${status.status} (${status.done} requests answered)`, nextRetryDelay: input.checkEveryMs });
  }

  /**
   * The items of parts a spend limit refused, recorded as answered with its refusal: their
   * reason is theirs, whatever ends the provider's batch (a cancel, its window).
   */
  async function recordRefused(batch: LoadedBatch, state: NativeBatchState, boundary: number | null): Promise<void> {
    const refusal = state.refusal;
    if (!refusal || boundary === null) return;
    let rows: ErroredRow[] = [];
    for await (const item of itemsBefore(batch, null)) {
      if (item.line < boundary) continue;
      rows.push({ line: item.line, customId: item.customId, attempts: 0, statusCode: refusal.statusCode, body: refusal.body });
      if (rows.length === RECORD_ROWS) {
        await recordErrored(batch, rows);
        rows = [];
      }
    }
    await recordErrored(batch, rows);
  }

  /** Items that end as errors the provider never answered (refused parts, missing answers): each once, counted failed. */
  async function recordErrored(batch: LoadedBatch, rows: ErroredRow[]): Promise<void> {
    if (rows.length === 0) return;
    await deps.db.transaction(async (tx) => {
      const inserted = await tx.insert(batchItems).values(rows.map((r) => ({ batchId: batch.id, outcome: 'errored' as const, costNanos: 0, ...r }))).onConflictDoNothing().returning({ line: batchItems.line });
      await tx.update(batches).set({ failed: sql`${batches.failed} + ${inserted.length}`, updatedAt: sql`now()` }).where(eq(batches.id, batch.id));
    });
  }

  /** Asks the provider to cancel its batch, once and only asks: a provider that refuses (its batch ended meanwhile) is answered by the next status check. */
  async function askToCancel(t: Target, state: NativeBatchState): Promise<void> {
    await call(t, 'the batch\'s cancel', { path: `${providerPath(state)}/cancel`, body: {} }, { timeoutMs: CHECK_CALL_TIMEOUT_MS }).then((body) => body.json()).catch(() => null);
  }

  /**
   * Deletes what the batch left at the provider once its results are read: OpenAI's input,
   * output and error files; Anthropic's batch with its results. The prompts and answers then
   * live only in the gateway's own files, under the organization's retention. Best effort: a
   * provider that refuses keeps them under its own retention (OpenAI's files, Anthropic's 29 days).
   */
  async function forgetAtProvider(t: Target, state: NativeBatchState, status: NativeStatus): Promise<void> {
    const paths = state.plan.wire === 'anthropic' ? [providerPath(state)]
      : [state.providerInputFileId ?? null, status.outputFileId, status.errorFileId].filter((id): id is string => id !== null).map((id) => `/files/${encodeURIComponent(id)}`);
    for (const where of paths) await call(t, 'a delete of the batch\'s data', { method: 'DELETE', path: where }, { timeoutMs: CHECK_CALL_TIMEOUT_MS }).then((body) => body.text()).catch(() => null);
  }

  /** The sent items a completed provider batch gave no answer for, recorded as errors saying so. */
  async function recordMissing(batch: LoadedBatch, customIds: Map<number, string>): Promise<void> {
    const recorded = new Set((await deps.db.select({ line: batchItems.line }).from(batchItems).where(eq(batchItems.batchId, batch.id))).map((r) => r.line));
    const missing = [...customIds].filter(([line]) => !recorded.has(line));
    for (let at = 0; at < missing.length; at += RECORD_ROWS) {
      await recordErrored(batch, missing.slice(at, at + RECORD_ROWS).map(([line, customId]) => ({ line, customId, attempts: 1, statusCode: 502, body: missingAnswer(batch.wire) })));
    }
  }

  return {
    /**
     * Holds the batch's worst case part by part, then sends the held parts' items to the
     * provider as one batch of its own. Answers whether anything was sent, and the refusal the
     * unheld parts end with. A retry after the provider's batch was recorded answers it again;
     * one that finds the send begun but unrecorded (its worker lost) fails the batch rather
     * than send it twice: the provider cannot tell the two apart, and would run and bill both.
     */
    async submitNativeBatch(input: { batchId: string }): Promise<{ submitted: boolean; refusal: BatchRefusal | null; cancelled?: boolean }> {
      return beatingThroughout(async () => {
        const batch = await loadBatch(input.batchId);
        const state = await stateOf(batch);
        if (state.providerBatchId) return { submitted: true, refusal: state.refusal ?? null };
        if (state.submitting) throw refused('The batch was sent to the provider, but the answer was lost with the worker that sent it; it was not sent again, since the provider could run and bill it twice. Check the provider\'s batches, then create it again.');
        if (batch.status === 'cancelling') {
          // Cancelled before anything reached the provider: what an earlier attempt held goes back.
          await endHolds(batch, state, 'release');
          return { submitted: false, refusal: null, cancelled: true };
        }
        const { heldParts, refusal } = await holdParts(batch, state);
        if (heldParts === 0) return { submitted: false, refusal };
        const t = await targetOf(batch, state);
        const boundary = await heldBoundary(batch, heldParts);
        const providerBatchId = state.plan.wire === 'openai' ? await createOpenAIBatch(batch, state, t, boundary) : await createAnthropicBatch(batch, state, t, boundary);
        await saveState(batch.id, { providerBatchId, providerStatus: 'in_progress' });
        return { submitted: true, refusal };
      });
    },

    /**
     * One status check of the provider's batch. While it runs, fails retryably with the next
     * check's delay; a cancel of our batch, or its window running out, is passed on to the
     * provider (once), which then ends its batch with what it finished.
     */
    async awaitNativeBatch(input: { batchId: string; checkEveryMs: number }): Promise<NativeStatus> {
      // Beating while the check is in flight: a worker lost mid-check is noticed within seconds.
      return beatingThroughout(() => checkOnce(input));
    },

    /**
     * Reads the provider's results, records each answered item once (mapped back by the line
     * its `custom_id` names) with its cost at batch rates, and ends every part's hold at what
     * its items cost. Results that cannot be read, or fewer answers than the provider counts,
     * leave the holds as charged: the provider billed answers the gateway could not price.
     * Answers how the batch ends; a batch the provider failed answers its reason.
     */
    async collectNativeBatch(input: { batchId: string; status: NativeStatus }): Promise<{ ending: BatchEnding } | { failed: string }> {
      return beatingThroughout(async () => {
        const batch = await loadBatch(input.batchId);
        const state = await stateOf(batch);
        if (state.collected) return { ending: { status: state.collected } };
        if (input.status.failure !== null) {
          await endHolds(batch, state, 'release');
          return { failed: `the provider failed it: ${cleanProviderText(input.status.failure).slice(0, 500)}` };
        }
        const boundary = await heldBoundary(batch, state.heldParts ?? 0);
        const customIds = new Map<number, string>();
        for await (const item of itemsBefore(batch, boundary)) customIds.set(item.line, item.customId);
        const t = await targetOf(batch, state);
        // Anthropic's results at the batch's own path under the connection (its `results_url`
        // names api.anthropic.com, which a connection through a proxy does not reach).
        const sources: UpstreamRequest[] = state.plan.wire === 'openai'
          ? [input.status.outputFileId, input.status.errorFileId].filter((id): id is string => id !== null).map((id) => ({ path: `/files/${encodeURIComponent(id)}/content` }))
          : [{ path: `${providerPath(state)}/results` }];
        let expired = false;
        let answered = 0;
        let unreadable = 0;
        for (const source of sources) {
          let pending: Array<Extract<NativeResult, { answered: true }>> = [];
          for await (const result of resultsOf(t, state.plan.wire, source)) {
            if (result === null || (result.answered && !customIds.has(result.line))) {
              unreadable += 1;
              continue;
            }
            if (!result.answered) {
              expired ||= result.unrun === 'expired';
              continue;
            }
            answered += 1;
            pending.push(result);
            if (pending.length === RECORD_ROWS) {
              await record(batch, state, pending, customIds);
              pending = [];
            }
          }
          await record(batch, state, pending, customIds);
        }
        await recordRefused(batch, state, boundary);
        await endHolds(batch, state, unreadable > 0 || answered < input.status.done ? 'held' : 'settle');
        const status = state.cancelSent === 'cancelled' || input.status.status === 'cancelled' ? 'cancelled'
          : state.cancelSent === 'expired' || expired || input.status.status === 'expired' ? 'expired' : 'completed';
        // A batch the provider completed answers every item: one it left out is named as missing,
        // not as cancelled (a cancelled or expired batch's unanswered items are that).
        if (status === 'completed') await recordMissing(batch, customIds);
        // Recorded before the provider's copies are deleted: a retry after that answers from here.
        await saveState(batch.id, { collected: status });
        await forgetAtProvider(t, state, input.status);
        return { ending: { status } };
      });
    },

    /**
     * A native batch that fails on the gateway's side (a refusal, its connection gone, a provider
     * that never ended it): a provider batch under way is asked to cancel, and the holds end.
     * Released when nothing may have reached the provider; kept as charged when something may
     * have (the provider runs and bills what it took, and the gateway will not read it).
     */
    async abandonNativeBatch(input: { batchId: string }): Promise<void> {
      return beatingThroughout(async () => {
        const batch = await loadBatch(input.batchId);
        if (!batch.native) return;
        const state = batch.native;
        if (state.providerBatchId && !state.cancelSent) {
          const t = await targetOf(batch, state).catch(() => null);
          if (t) await askToCancel(t, state);
        }
        await endHolds(batch, state, state.providerBatchId || state.submitting ? 'held' : 'release');
      });
    },
  };
}

export type NativeBatchActivities = ReturnType<typeof createNativeBatchActivities>;
