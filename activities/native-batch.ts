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
import { anthropicRequest, nativeResult, nativeStatus, openAIInputLine, type NativeBatchState, type NativeResult, type NativeStatus } from '../core/batches/native-wire';
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

  async function call(t: Target, what: string, request: UpstreamRequest): Promise<Readable & { json(): Promise<unknown> }> {
    const answer = await sendUpstream(deps.agent, ADAPTERS[t.target.kind], t.target, { ...request, ...(t.query && { query: { ...t.query, ...request.query } }) });
    if (!answer.ok) throw providerRefusal(what, answer.failure);
    return answer.body as unknown as Readable & { json(): Promise<unknown> };
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
      refusal = await deps.native.hold({ holdId: partHoldId(batch.id, part), keyId: batch.keyId, plan: state.plan, wire: batch.wire, bodies: items.map((i) => i.body), leaseMs: windowMs + 3_600_000 });
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
        if (!out.write(`${openAIInputLine(item.line, item.body, state.plan.upstreamModel, t.azure)}\n`)) await once(out, 'drain');
      }
      out.end();
      await once(out, 'close');
      const form = new FormData();
      form.set('purpose', 'batch');
      form.set('file', await fs.openAsBlob(file, { type: 'application/jsonl' }), `${batch.id}.jsonl`);
      const uploaded = await (await call(t, 'the batch input file', { path: '/files', body: form })).json() as { id?: unknown };
      if (typeof uploaded.id !== 'string') throw refused('The provider answered the input file upload without an id.');
      await saveState(batch.id, { submitting: true });
      const created = await (await call(t, 'the batch', {
        path: '/batches', sendOnce: true,
        body: { input_file_id: uploaded.id, endpoint: t.azure ? '/chat/completions' : '/v1/chat/completions', completion_window: '24h', metadata: { gateway_batch_id: batch.id } },
      })).json() as { id?: unknown };
      if (typeof created.id !== 'string') throw refused('The provider answered the batch without an id.');
      return created.id;
    } finally {
      await fs.promises.rm(file, { force: true });
    }
  }

  async function createAnthropicBatch(batch: LoadedBatch, state: NativeBatchState, t: Target, boundary: number | null): Promise<string> {
    const requests: Record<string, unknown>[] = [];
    for await (const item of itemsBefore(batch, boundary)) requests.push(anthropicRequest(item.line, item.body, state.plan.upstreamModel));
    await saveState(batch.id, { submitting: true });
    const created = await (await call(t, 'the batch', { path: '/messages/batches', sendOnce: true, body: { requests } })).json() as { id?: unknown };
    if (typeof created.id !== 'string') throw refused('The provider answered the batch without an id.');
    return created.id;
  }

  /** A results file's lines, in the provider's order. */
  async function* resultsOf(t: Target, wire: NativeBatchState['plan']['wire'], request: UpstreamRequest): AsyncGenerator<NativeResult> {
    const body = await call(t, 'the batch results', { ...request, method: 'GET' });
    for await (const { text } of jsonlLines(body)) {
      const result = nativeResult(wire, text);
      if (result) yield result;
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
        id: requestId, orgId: batch.orgId, keyId: batch.keyId, projectId: batch.projectId, endpoint: plan.wire === 'anthropic' ? 'messages' : 'chat.completions',
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

  /** Ends each held part's hold: settled at its items' recorded costs, or released when nothing ran. */
  async function endHolds(batch: LoadedBatch, state: NativeBatchState, heldParts: number, release: boolean): Promise<void> {
    for (let part = 0; part < heldParts; part += 1) {
      const holdId = partHoldId(batch.id, part);
      const from = (await chunkStart(batch, part))?.line ?? 0;
      const to = ((await chunkStart(batch, part + 1))?.line ?? Number.MAX_SAFE_INTEGER) - 1;
      const [{ nanos } = { nanos: 0 }] = await deps.db.select({ nanos: sql<number>`coalesce(sum(${batchItems.costNanos}), 0)::bigint` }).from(batchItems)
        .where(and(eq(batchItems.batchId, batch.id), between(batchItems.line, from, Math.min(to, 2_147_483_647))));
      const now = deps.clock.now();
      await closeJobSpend(deps.db, holdId, release ? 'released' : { cost: Number(nanos) / 1e9, provider: state.plan.kind, model: state.plan.upstreamModel }, now);
      await endJobHold(deps.db, deps.spendRedis, holdId);
    }
  }

  /** One status check of a provider batch (awaitNativeBatch). */
  async function checkOnce(input: { batchId: string; checkEveryMs: number }): Promise<NativeStatus> {
    const batch = await loadBatch(input.batchId);
    const state = await stateOf(batch);
    const t = await targetOf(batch, state);
    const providerId = state.providerBatchId!;
    const base = state.plan.wire === 'openai' ? `/batches/${encodeURIComponent(providerId)}` : `/messages/batches/${encodeURIComponent(providerId)}`;
    if (!state.cancelSent) {
      const stop = batch.status === 'cancelling' ? 'cancelled' : deps.clock.now().getTime() >= batch.expiresAt.getTime() ? 'expired' : null;
      if (stop) {
        await (await call(t, 'the batch\'s cancel', { path: `${base}/cancel`, body: {} })).json().catch(() => null);
        await saveState(batch.id, { cancelSent: stop });
      }
    }
    const status = nativeStatus(state.plan.wire, await (await call(t, 'a status check of the batch', { method: 'GET', path: base })).json());
    if (status.status !== state.providerStatus || status.done !== state.providerDone) await saveState(batch.id, { providerStatus: status.status, providerDone: status.done });
    if (status.ended) return status;
    // Waiting is not an error: logged at DEBUG by the SDK, not counted as a failed activity.
    throw ApplicationFailure.create({ type: NATIVE_BATCH_RUNNING, category: ApplicationFailureCategory.BENIGN, message: `the provider's batch ${providerId} is ${status.status} (${status.done} requests answered)`, nextRetryDelay: input.checkEveryMs });
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
        if (batch.status === 'cancelling') return { submitted: false, refusal: null, cancelled: true };
        if (state.submitting) throw refused('The batch was sent to the provider, but the answer was lost with the worker that sent it; it was not sent again, since the provider could run and bill it twice. Check the provider\'s batches, then create it again.');
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
     * its items cost. Answers how the batch ends; a batch the provider failed answers its reason.
     */
    async collectNativeBatch(input: { batchId: string; status: NativeStatus }): Promise<{ ending: BatchEnding } | { failed: string }> {
      return beatingThroughout(async () => {
        const batch = await loadBatch(input.batchId);
        const state = await stateOf(batch);
        const heldParts = state.heldParts ?? 0;
        if (input.status.failure !== null) {
          await endHolds(batch, state, heldParts, true);
          return { failed: `the provider failed it: ${input.status.failure}` };
        }
        const boundary = await heldBoundary(batch, heldParts);
        const customIds = new Map<number, string>();
        for await (const item of itemsBefore(batch, boundary)) customIds.set(item.line, item.customId);
        const t = await targetOf(batch, state);
        const sources: UpstreamRequest[] = state.plan.wire === 'openai'
          ? [input.status.outputFileId, input.status.errorFileId].filter((id): id is string => id !== null).map((id) => ({ path: `/files/${encodeURIComponent(id)}/content` }))
          : input.status.resultsUrl ? [{ path: input.status.resultsUrl }] : [];
        let expired = false;
        for (const source of sources) {
          let pending: Array<Extract<NativeResult, { answered: true }>> = [];
          for await (const result of resultsOf(t, state.plan.wire, source)) {
            if (!result.answered) {
              expired ||= result.unrun === 'expired';
              continue;
            }
            pending.push(result);
            if (pending.length === RECORD_ROWS) {
              await record(batch, state, pending, customIds);
              pending = [];
            }
          }
          await record(batch, state, pending, customIds);
        }
        await endHolds(batch, state, heldParts, false);
        const status = state.cancelSent === 'cancelled' || input.status.status === 'cancelled' ? 'cancelled'
          : state.cancelSent === 'expired' || expired || input.status.status === 'expired' ? 'expired' : 'completed';
        return { ending: { status, ...(state.refusal && { unrun: state.refusal }) } };
      });
    },
  };
}

export type NativeBatchActivities = ReturnType<typeof createNativeBatchActivities>;
