import { ApplicationFailure } from '@temporalio/activity';
import { eq, getTableColumns, sql } from 'drizzle-orm';
import { isLineError, parseInputLine, type BatchInputItem } from '../core/batches/input-lines';
import { jsonlLines } from '../core/batches/jsonl-reader';
import type { BatchRow } from '../core/batches/present';
import type { Database } from '../core/db/client';
import { batches, files, type BatchChunkStart } from '../core/db/schema';
import type { OutputStorage } from '../core/storage/output-storage';

/** A batch as its activities read it (loadBatch). */
export type LoadedBatch = Omit<BatchRow, 'chunkStarts'> & { chunkCount: number | null };

/** The batch's input file or its row is gone: nothing a retry can mend, so the run ends the batch failed. */
export const BATCH_INPUT_GONE = 'BatchInputGone';
export const inputGone = (what: string) => ApplicationFailure.nonRetryable(what, BATCH_INPUT_GONE);

/**
 * How a batch's activities read it, whoever runs its items (the gateway, activities/batch-run.ts;
 * a provider's batch API, activities/native-batch.ts): its row, its input file, one chunk.
 */
export function batchInputReaders(deps: { db: Database; storage: OutputStorage }) {
  /**
   * The batch's row, its chunk list left in Postgres (a chunk reads its own start, chunkItems)
   * and only counted: `chunkCount` is null until validation has written it.
   */
  async function loadBatch(batchId: string): Promise<LoadedBatch> {
    const { chunkStarts, ...columns } = getTableColumns(batches);
    const [row] = await deps.db.select({ ...columns, chunkCount: sql<number | null>`jsonb_array_length(${chunkStarts})::int` }).from(batches).where(eq(batches.id, batchId));
    if (!row) throw inputGone(`batch ${batchId} has no row`);
    return row;
  }

  async function openInput(batch: LoadedBatch, start = 0) {
    const [file] = await deps.db.select().from(files).where(eq(files.id, batch.inputFileId));
    const stored = file ? await deps.storage.open(file.storageKey, { start }) : null;
    return stored?.stream ?? null;
  }

  /** Where a chunk starts in the input (its byte offset and first line), or null past the last. */
  async function chunkStart(batch: LoadedBatch, chunk: number): Promise<BatchChunkStart | null> {
    // The one chunk's start, not the whole list (50,000 items make 500 of them, read per chunk).
    const [{ start } = { start: null }] = await deps.db.select({ start: sql<BatchChunkStart | null>`${batches.chunkStarts} -> (${chunk})::int` }).from(batches).where(eq(batches.id, batch.id));
    return start;
  }

  /** The items of one chunk, read from where validation found it starts. */
  async function chunkItems(batch: LoadedBatch, chunk: number): Promise<BatchInputItem[]> {
    const start = await chunkStart(batch, chunk);
    if (!start) throw inputGone(`batch ${batch.id} has no chunk ${chunk}`);
    const stream = await openInput(batch, start.offset);
    if (!stream) throw inputGone(`batch ${batch.id}'s input file is gone`);
    const items: BatchInputItem[] = [];
    try {
      for await (const { text, line } of jsonlLines(stream, { startOffset: start.offset, firstLine: start.line })) {
        if (text.trim() === '') continue;
        const parsed = parseInputLine(text, line, batch.endpoint);
        if (isLineError(parsed)) throw new Error(`batch ${batch.id}: line ${line}, validated before, no longer parses (${parsed.message})`);
        items.push(parsed);
        if (items.length === batch.chunkItems) break;
      }
    } finally {
      stream.destroy();
    }
    return items;
  }

  /** Every item before `beforeLine` (all of them when null), in order, read a line at a time. */
  async function* itemsBefore(batch: LoadedBatch, beforeLine: number | null): AsyncGenerator<BatchInputItem> {
    const stream = await openInput(batch);
    if (!stream) throw inputGone(`batch ${batch.id}'s input file is gone`);
    try {
      for await (const { text, line } of jsonlLines(stream)) {
        if (beforeLine !== null && line >= beforeLine) return;
        if (text.trim() === '') continue;
        const parsed = parseInputLine(text, line, batch.endpoint);
        if (!isLineError(parsed)) yield parsed;
      }
    } finally {
      stream.destroy();
    }
  }

  return { loadBatch, openInput, chunkStart, chunkItems, itemsBefore };
}
