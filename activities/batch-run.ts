import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { Context } from '@temporalio/activity';
import { and, asc, between, eq, gt, inArray, isNull, isNotNull, lte, sql } from 'drizzle-orm';
import { isLineError, InputCheck, parseInputLine, type BatchInputItem } from '../core/batches/input-lines';
import { jsonlLines, LineTooLong } from '../core/batches/jsonl-reader';
import { batchFileExpiry } from '../core/batches/retention';
import { queueBatchEvent } from '../core/batches/batch-events';
import type { QueuedDelivery } from '../core/webhooks/fan-out';
import { anthropicResultLine, openAIResultLine, type FinishedItem, type UnrunReason } from '../core/batches/result-lines';
import { batchEnded } from '../core/batches/present';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { batches, batchItems, files, type BatchChunkStart, type BatchItemOutcome } from '../core/db/schema';
import { toNanos } from '../core/spend/money';
import type { OutputStorage } from '../core/storage/output-storage';
import type { BatchChunkResult, BatchEnding } from '../workflows/definitions';
import { beatingThroughout } from './heartbeats';
import { batchInputReaders, inputGone, type LoadedBatch } from './batch-input';
import type { NativeBatchPlan } from '../core/batches/native-wire';


/** What one item's call through the gateway answered. */
export type BatchItemAnswer = { status: number; body: unknown; requestId: string | null; retryAfterMs: number | null };

/**
 * One item through the gateway's own request path, as the batch's key: the worker runs the API
 * application in-process (api/in-process-gateway.ts), so an item meets every rule a request
 * meets (reach, routes, spend limits, rate limits, guardrails, cache, the request log).
 */
export type BatchItemCaller = (request: { batchId: string; keyId: string; endpoint: string; body: Record<string, unknown> }) => Promise<BatchItemAnswer>;

/** What validation found: the batch failed, or how many chunks it has and whether a provider's batch API runs it. */
export type BatchValidation = { status: 'failed' } | { status: 'in_progress'; chunks: number; native?: boolean };

export type BatchDeps = {
  db: Database;
  storage: OutputStorage;
  clock: Clock;
  callItem: BatchItemCaller;
  /** Where finalize writes the output files before they go to storage (GW_DATA_DIR's spool). */
  scratchDir?: string;
  /** Starts the deliveries of a batch's ending event, once its transaction has committed. */
  startDeliveries: (deliveries: QueuedDelivery[]) => Promise<void>;
  /** Where an Anthropic batch's `results_url` points in its event (GW_PUBLIC_URL). */
  publicUrl: string;
  /** Where a batch of one model would run natively (api/native-batch-services.ts); absent or null: the gateway runs it. */
  nativePlan?: (input: { keyId: string; endpoint: string; model: string }) => Promise<NativeBatchPlan | null>;
};

/** A wait the key's rate limit asks for is honoured up to this long at a time (then asked again). */
const MAX_RATE_WAIT_MS = 60_000;

/** How an item's answer is recorded: 2xx succeeded, anything else errored (its body is the error). */
const outcomeOf = (status: number): BatchItemOutcome => (status >= 200 && status < 300 ? 'succeeded' : 'errored');

/** The gateway's cost of an item, from its answer's `usage.cost` (every model wire carries it); 0 when absent. */
function costNanosOf(body: unknown): number {
  const cost = (body as { usage?: { cost?: unknown } } | null)?.usage?.cost;
  return typeof cost === 'number' && Number.isFinite(cost) ? toNanos(cost) : 0;
}

/**
 * A 402 whose limit is the batch's own, shared by every item: the key's (its lineage's), its
 * project's, its member's, its organization's, or the subscription's. The batch stops on it.
 * A limit of one item's own (its end user's cap, an unpriced model under a budget) is that
 * item's answer, and the batch goes on.
 */
const SHARED_LIMIT_CODES: ReadonlySet<string> = new Set(['key_budget', 'key_lifetime_limit', 'project_budget', 'member_budget', 'organization_budget', 'subscription_required', 'trial_payment_failed']);
function isSharedLimit(answer: BatchItemAnswer): boolean {
  if (answer.status !== 402) return false;
  const code = (answer.body as { error?: { code?: unknown } } | null)?.error?.code;
  return typeof code === 'string' && SHARED_LIMIT_CODES.has(code);
}


/** Answers fetched at a time when finalize writes the files: bounded by their size, not their count. */
const FINALIZE_PAGE_BYTES = 32_000_000;

/** An error the key's own rate limit gave (not a provider's 429, which is the item's answer). */
function isKeyRateLimited(answer: BatchItemAnswer): boolean {
  if (answer.status !== 429) return false;
  const error = (answer.body as { error?: { code?: unknown } } | null)?.error;
  return error?.code === null || error?.code === undefined;
}

const sleep = (ms: number, signal?: AbortSignal) => new Promise<void>((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener('abort', () => {
    clearTimeout(timer);
    resolve();
  }, { once: true });
});

export function createBatchActivities(deps: BatchDeps) {
  const { loadBatch, openInput, chunkItems } = batchInputReaders(deps);

  return {
    /**
     * Reads the whole input once: each line checked (a bad line fails the batch, named as OpenAI
     * names it), the count kept, and the byte offset where every chunk starts written down. Done
     * once: a retry after it finds the batch past `validating` and answers what it wrote.
     */
    async validateBatchInput(input: { batchId: string }): Promise<BatchValidation> {
      const batch = await loadBatch(input.batchId);
      if (batch.status === 'failed') return { status: 'failed' };
      if (batch.chunkCount !== null) return { status: 'in_progress', chunks: batch.chunkCount, native: batch.native !== null };
      return beatingThroughout(() => validate(batch));
    },

    /**
     * Runs one chunk's items not yet recorded, `concurrency` at a time. Each wave marks its items
     * started (a second mark is a re-run: the first call was lost with its worker, and was billed
     * as the provider billed it), calls them, and records their answers with the batch's counts
     * in one transaction, each item once. Stops before a wave when the batch is being cancelled
     * or past its window, and after a wave in which a limit shared by the batch had no room.
     */
    async runBatchChunk(input: { batchId: string; chunk: number; concurrency: number }): Promise<BatchChunkResult> {
      // Beating every second, however long a wave's model calls take: a lost worker is noticed
      // within the heartbeat timeout, and its unrecorded items run again on another.
      return beatingThroughout(() => runChunk(input));
    },

    /**
     * Writes the output file (items answered 2xx) and the error file (the rest, and items never
     * run: cancelled, expired, or refused for the budget) in input order, then ends the batch.
     * Idempotent: the files' ids come from the batch's, and a batch already ended is left as is.
     * Beats throughout: copying a large output to storage takes a while.
     */
    async finalizeBatch(input: { batchId: string; ending: BatchEnding }): Promise<void> {
      const batch = await loadBatch(input.batchId);
      if (batchEnded(batch)) return;
      return beatingThroughout(() => finalize(batch, input.ending));
    },

    /**
     * Ends a batch that cannot go on (its input gone; an error the run gave up on) `failed`, with
     * the reason in `errors` and its event; the items recorded so far are kept in its counts.
     */
    async failBatch(input: { batchId: string; message: string }): Promise<void> {
      const now = deps.clock.now();
      const deliveries = await deps.db.transaction(async (tx) => {
        const [failed] = await tx.update(batches).set({ status: 'failed', errors: [{ code: 'batch_failed', message: input.message, param: null, line: null }], failedAt: now, updatedAt: now })
          .where(and(eq(batches.id, input.batchId), inArray(batches.status, ['validating', 'in_progress', 'finalizing', 'cancelling']))).returning();
        return failed ? queueBatchEvent(tx, failed, deps.publicUrl, now) : [];
      });
      await deps.startDeliveries(deliveries);
    },
  };

  async function validate(batch: LoadedBatch): Promise<BatchValidation> {
    const check = new InputCheck(batch.endpoint);
    const starts: BatchChunkStart[] = [];
    const stream = await openInput(batch);
    let tooLong: number | null = null;
    if (stream) {
      try {
        for await (const { text, line, offset } of jsonlLines(stream)) {
          const before = check.items;
          const item = check.take(text, line);
          if (item && before % batch.chunkItems === 0) starts.push({ offset, line });
          // Past the bound the batch fails anyway: the rest of the file is not read.
          if (check.overLimit) break;
        }
      } catch (err) {
        if (!(err instanceof LineTooLong)) throw err;
        tooLong = err.line;
      } finally {
        stream.destroy();
      }
    }
    const errors = !stream
      ? [{ code: 'invalid_file', message: `The input file \`${batch.inputFileId}\` is gone.`, param: 'input_file_id', line: null }]
      : tooLong !== null ? [{ code: 'invalid_json_line', message: `Line ${tooLong} is longer than any request the gateway takes.`, param: null, line: tooLong }] : check.errors();
    const now = deps.clock.now();
    if (errors.length > 0) {
      const deliveries = await deps.db.transaction(async (tx) => {
        // A cancel that came while validating does not keep a refused batch open: it fails.
        const [failed] = await tx.update(batches).set({ status: 'failed', errors, failedAt: now, updatedAt: now }).where(and(eq(batches.id, batch.id), inArray(batches.status, ['validating', 'cancelling']))).returning();
        return failed ? queueBatchEvent(tx, failed, deps.publicUrl, now) : [];
      });
      await deps.startDeliveries(deliveries);
      return { status: 'failed' };
    }
    // One model whose route's first connection has a batch API, and no item asking for the
    // gateway's routing or cache: the provider runs it (native-batch.ts).
    const plan = check.model && !check.needsGateway ? await deps.nativePlan?.({ keyId: batch.keyId, endpoint: batch.endpoint, model: check.model }) : null;
    // A cancel that came while validating keeps its `cancelling`; the run stops at its first chunk.
    await deps.db.update(batches).set({
      chunkStarts: starts, total: check.items, updatedAt: now, native: plan ? { plan } : null,
      status: sql`case when ${batches.status} = 'validating' then 'in_progress' else ${batches.status} end`,
      inProgressAt: now,
    }).where(eq(batches.id, batch.id));
    return { status: 'in_progress', chunks: starts.length, native: plan !== null && plan !== undefined };
  }

  async function finalize(batch: LoadedBatch, ending: BatchEnding): Promise<void> {
    const startedAt = deps.clock.now();
    if (ending.status === 'completed') {
      await deps.db.update(batches).set({ status: 'finalizing', finalizingAt: startedAt, updatedAt: startedAt }).where(and(eq(batches.id, batch.id), eq(batches.status, 'in_progress')));
    }
    const scratchRoot = deps.scratchDir ?? os.tmpdir();
    await fs.promises.mkdir(scratchRoot, { recursive: true });
    const scratch = await fs.promises.mkdtemp(path.join(scratchRoot, `${batch.id}-`));
    try {
      const outputPath = path.join(scratch, 'output.jsonl');
      const errorPath = path.join(scratch, 'errors.jsonl');
      const output = fs.createWriteStream(outputPath);
      const errorsOut = fs.createWriteStream(errorPath);
      const counts = { output: 0, errors: 0, unrun: 0, lost: 0 };
      const write = async (stream: fs.WriteStream, line: string) => {
        if (!stream.write(`${line}\n`)) await once(stream, 'drain');
      };
      const lineOf = batch.wire === 'anthropic' ? anthropicResultLine : openAIResultLine;
      const unrun: UnrunReason = ending.unrun ? { status: 'completed', refusal: ending.unrun } : { status: ending.status === 'expired' ? 'expired' : 'cancelled' };
      const recordedRows = recordedItemsInOrder(batch.id);
      let next = await recordedRows.next();
      const stream = await openInput(batch);
      if (!stream) throw inputGone(`batch ${batch.id}'s input file is gone`);
      try {
        for await (const { text, line } of jsonlLines(stream)) {
          if (text.trim() === '') continue;
          const parsed = parseInputLine(text, line, batch.endpoint);
          if (isLineError(parsed)) continue;
          while (!next.done && next.value.line < line) next = await recordedRows.next();
          const row = !next.done && next.value.line === line ? next.value : null;
          const item: FinishedItem = row?.outcome ? { customId: parsed.customId, outcome: row.outcome, statusCode: row.statusCode, requestId: row.requestId, body: row.body } : { customId: parsed.customId, outcome: null, attempted: row !== null };
          const { file, line: result } = lineOf(item, unrun);
          counts[file] += 1;
          if (!row?.outcome) counts[row ? 'lost' : 'unrun'] += 1;
          await write(file === 'output' ? output : errorsOut, JSON.stringify(result));
        }
      } finally {
        stream.destroy();
      }
      output.end();
      errorsOut.end();
      await Promise.all([once(output, 'close'), once(errorsOut, 'close')]);

      const now = deps.clock.now();
      const expiresAt = await batchFileExpiry(deps.db, batch.orgId, now);
      const keep = async (suffix: 'output' | 'errors', file: string, count: number) => {
        if (count === 0) return null;
        const id = `file_${batch.id.slice(batch.id.indexOf('_') + 1)}${suffix === 'output' ? 'o' : 'e'}`;
        const storageKey = `files/${batch.orgId}/${id}`;
        const { bytes } = await deps.storage.put(storageKey, fs.createReadStream(file));
        await deps.db.insert(files).values({
          id, orgId: batch.orgId, keyId: batch.keyId, lineageId: batch.lineageId, projectId: batch.projectId,
          purpose: 'batch_output', filename: `${batch.id}_${suffix}.jsonl`, bytes, storageKey, expiresAt, createdAt: now,
        }).onConflictDoNothing();
        return id;
      };
      const [outputFileId, errorFileId] = [await keep('output', outputPath, counts.output), await keep('errors', errorPath, counts.errors)];
      const ended = ending.status;
      const deliveries = await deps.db.transaction(async (tx) => {
        const [moved] = await tx.update(batches).set({
          // Items lost with a worker count as failed; so do those a shared limit refused (they
          // carry its 402); the rest that never ran are `unrun` (cancelled, expired).
          status: ended, outputFileId, errorFileId, updatedAt: now,
          ...(ending.unrun ? { failed: sql`${batches.failed} + ${counts.unrun + counts.lost}`, unrun: 0 } : { failed: sql`${batches.failed} + ${counts.lost}`, unrun: counts.unrun }),
          ...(ended === 'completed' && { completedAt: now }),
          ...(ended === 'cancelled' && { cancelledAt: now }),
          ...(ended === 'expired' && { expiredAt: now }),
        }).where(and(eq(batches.id, batch.id), inArray(batches.status, ['in_progress', 'finalizing', 'cancelling']))).returning();
        // The answers live on in the files; the rows keep each item's outcome and cost.
        await tx.update(batchItems).set({ body: null }).where(eq(batchItems.batchId, batch.id));
        return moved ? queueBatchEvent(tx, moved, deps.publicUrl, now) : [];
      });
      await deps.startDeliveries(deliveries);
    } finally {
      await fs.promises.rm(scratch, { recursive: true, force: true });
    }
  }

  async function runChunk(input: { batchId: string; chunk: number; concurrency: number }): Promise<BatchChunkResult> {
    const context = Context.current();
    const batch = await loadBatch(input.batchId);
    const items = await chunkItems(batch, input.chunk);
    if (items.length === 0) return { stopped: null };
    const recorded = new Set((await deps.db.select({ line: batchItems.line }).from(batchItems)
      .where(and(eq(batchItems.batchId, batch.id), between(batchItems.line, items[0]!.line, items.at(-1)!.line), isNotNull(batchItems.outcome)))).map((r) => r.line));
    const todo = items.filter((item) => !recorded.has(item.line));

    for (let at = 0; at < todo.length; at += input.concurrency) {
      // An attempt the server gave up on (timed out, its worker thought lost) is cancelled here:
      // it must not go on calling models beside the retry that replaced it.
      context.cancellationSignal.throwIfAborted();
      const [now] = await deps.db.select({ status: batches.status, expiresAt: batches.expiresAt }).from(batches).where(eq(batches.id, batch.id));
      if (now?.status === 'cancelling') return { stopped: 'cancelled' };
      if (now && deps.clock.now().getTime() >= now.expiresAt.getTime()) return { stopped: 'expired' };
      const wave = todo.slice(at, at + input.concurrency);
      const marked = await deps.db.insert(batchItems)
        .values(wave.map((item) => ({ batchId: batch.id, line: item.line, customId: item.customId, attempts: 1 })))
        .onConflictDoUpdate({ target: [batchItems.batchId, batchItems.line], set: { attempts: sql`${batchItems.attempts} + 1`, updatedAt: sql`now()` } })
        .returning({ attempts: batchItems.attempts });
      const reruns = marked.filter((m) => m.attempts > 1).length;
      const answers = await Promise.all(wave.map((item) => callPaced(batch, item, context.cancellationSignal)));
      // A 402 beside other items may be theirs: each holds its worst case until it settles.
      // Alone, after they settled, the item meets the limit as a lone request would.
      for (const [i, answer] of answers.entries()) {
        if (answer.status === 402) answers[i] = await callPaced(batch, wave[i]!, context.cancellationSignal);
      }
      await recordAnswers(batch.id, wave.map((item, i) => ({ line: item.line, answer: answers[i]! })), reruns);
      const refused = answers.find(isSharedLimit);
      if (refused) return { stopped: 'budget', refusal: { statusCode: refused.status, body: refused.body } };
    }
    return { stopped: null };
  }

  /** Calls one item, waiting out the key's own rate limit (the batch is paced to it) and calling again. */
  async function callPaced(batch: LoadedBatch, item: BatchInputItem, signal: AbortSignal): Promise<BatchItemAnswer> {
    for (;;) {
      const answer = await deps.callItem({ batchId: batch.id, keyId: batch.keyId, endpoint: batch.endpoint, body: item.body });
      if (!isKeyRateLimited(answer) || signal.aborted) return answer;
      await sleep(Math.min(MAX_RATE_WAIT_MS, Math.max(250, answer.retryAfterMs ?? 1_000)), signal);
    }
  }

  /** Records a wave's answers, each item once, and moves the batch's counts by what was recorded now. */
  async function recordAnswers(batchId: string, answers: { line: number; answer: BatchItemAnswer }[], reruns: number): Promise<void> {
    await deps.db.transaction(async (tx) => {
      let completed = 0;
      let failed = 0;
      let cost = 0;
      for (const { line, answer } of answers) {
        const outcome = outcomeOf(answer.status);
        const costNanos = costNanosOf(answer.body);
        const [moved] = await tx.update(batchItems).set({ outcome, statusCode: answer.status, requestId: answer.requestId, body: answer.body, costNanos, updatedAt: sql`now()` })
          .where(and(eq(batchItems.batchId, batchId), eq(batchItems.line, line), isNull(batchItems.outcome)))
          .returning({ line: batchItems.line });
        if (!moved) continue;
        if (outcome === 'succeeded') completed += 1;
        else failed += 1;
        cost += costNanos;
      }
      await tx.update(batches).set({
        completed: sql`${batches.completed} + ${completed}`, failed: sql`${batches.failed} + ${failed}`,
        rerun: sql`${batches.rerun} + ${reruns}`, costNanos: sql`${batches.costNanos} + ${cost}`, updatedAt: sql`now()`,
      }).where(eq(batches.id, batchId));
    });
  }

  /**
   * The items of a batch that were called (recorded, or marked started and lost), in line order,
   * read a page at a time: up to 500 rows and FINALIZE_PAGE_BYTES of answers (an embeddings
   * answer may be tens of megabytes), sized from the stored answers before they are fetched.
   */
  async function* recordedItemsInOrder(batchId: string) {
    let after = 0;
    for (;;) {
      const sizes = await deps.db.select({ line: batchItems.line, bytes: sql<number>`coalesce(pg_column_size(${batchItems.body}), 0)::int` }).from(batchItems)
        .where(and(eq(batchItems.batchId, batchId), gt(batchItems.line, after))).orderBy(asc(batchItems.line)).limit(500);
      if (sizes.length === 0) return;
      let total = 0;
      let last = sizes[0]!.line;
      for (const size of sizes) {
        if (total > 0 && total + size.bytes > FINALIZE_PAGE_BYTES) break;
        total += size.bytes;
        last = size.line;
      }
      yield* await deps.db.select().from(batchItems).where(and(eq(batchItems.batchId, batchId), gt(batchItems.line, after), lte(batchItems.line, last))).orderBy(asc(batchItems.line));
      after = last;
    }
  }
}

export type BatchActivities = ReturnType<typeof createBatchActivities>;
