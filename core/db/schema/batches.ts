import { sql } from 'drizzle-orm';
import { bigint, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';
import type { NativeBatchState } from '../../batches/native-wire';

/** What a file is for (OpenAI's `purpose`): a batch's input, or the output and error files a batch writes. */
export const FILE_PURPOSES = ['batch', 'batch_output'] as const;
export type FilePurpose = (typeof FILE_PURPOSES)[number];

/**
 * Files of OpenAI's Files API (issue 56): a batch's JSONL input, uploaded by a key and streamed
 * to output storage, and the output and error files a batch writes. Read, listed and deleted
 * within the uploading key's reach, like jobs; removed with their object by the retention run.
 */
export const files = pgTable(
  'files',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    keyId: text('key_id').notNull(),
    lineageId: text('lineage_id').notNull(),
    projectId: text('project_id').notNull(),
    purpose: text('purpose', { enum: FILE_PURPOSES }).notNull(),
    filename: text('filename').notNull(),
    bytes: bigint('bytes', { mode: 'number' }).notNull(),
    storageKey: text('storage_key').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('files_org_id').on(t.orgId, t.id),
    index('files_lineage_id').on(t.lineageId, t.id),
    // The retention run's walk over files past their expiry (core/media/expired-files.ts).
    index('files_expires_at').on(t.expiresAt, t.id).where(sql`${t.expiresAt} IS NOT NULL`),
  ],
);

/** OpenAI's batch statuses; an Anthropic batch shows them as its `processing_status` (core/batches/present.ts). */
export const BATCH_STATUSES = ['validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export const TERMINAL_BATCH_STATUSES: readonly BatchStatus[] = ['failed', 'completed', 'expired', 'cancelled'];

/** Where a chunk of a batch's items starts in its input file. */
export type BatchChunkStart = { offset: number; line: number };

/** One line the batch refused at validation (OpenAI's `errors.data[]`). */
export type BatchLineError = { code: string; message: string; param: string | null; line: number | null };

/**
 * A batch (issue 56), run by the `batchRun` workflow whose id is the batch's. The input is a
 * JSONL file; the workflow validates it, runs its items and writes the output and error files.
 * Counts are kept here as items are recorded, so a read shows progress.
 */
export const batches = pgTable(
  'batches',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    keyId: text('key_id').notNull(),
    lineageId: text('lineage_id').notNull(),
    projectId: text('project_id').notNull(),
    /** Which wire created it, and reads it: `openai` (`/v1/batches`) or `anthropic` (`/v1/messages/batches`). */
    wire: text('wire', { enum: ['openai', 'anthropic'] }).notNull(),
    /** The path every item calls (`/v1/chat/completions`, `/v1/embeddings`, `/v1/responses`, `/v1/messages`). */
    endpoint: text('endpoint').notNull(),
    inputFileId: text('input_file_id').notNull(),
    completionWindow: text('completion_window').notNull(),
    status: text('status', { enum: BATCH_STATUSES }).notNull().default('validating'),
    metadata: jsonb('metadata').$type<Record<string, string> | null>(),
    errors: jsonb('errors').$type<BatchLineError[] | null>(),
    /**
     * Where each run of `chunk_items` items starts in the input (its byte offset and line
     * number), written by validation: a chunk's activity seeks to its lines instead of reading
     * the file from the top.
     */
    chunkStarts: jsonb('chunk_starts').$type<BatchChunkStart[] | null>(),
    chunkItems: integer('chunk_items').notNull(),
    total: integer('total').notNull().default(0),
    completed: integer('completed').notNull().default(0),
    failed: integer('failed').notNull().default(0),
    /** Items that never ran: cancelled, or past the completion window. */
    unrun: integer('unrun').notNull().default(0),
    /** Items run again after a lost attempt (a killed worker): each charged as the provider billed it. */
    rerun: integer('rerun').notNull().default(0),
    /** The items' cost so far, in nano-dollars (summed as they are recorded). */
    costNanos: bigint('cost_nanos', { mode: 'number' }).notNull().default(0),
    outputFileId: text('output_file_id'),
    errorFileId: text('error_file_id'),
    /**
     * Set when the batch runs on the provider's own batch API (core/batches/native-wire.ts):
     * the connection and model, the parts held, the provider's batch id; null when the gateway
     * runs the items itself.
     */
    native: jsonb('native').$type<NativeBatchState | null>(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    inProgressAt: timestamp('in_progress_at', { withTimezone: true }),
    finalizingAt: timestamp('finalizing_at', { withTimezone: true }),
    completedAt: timestamp('completed_at', { withTimezone: true }),
    failedAt: timestamp('failed_at', { withTimezone: true }),
    expiredAt: timestamp('expired_at', { withTimezone: true }),
    cancellingAt: timestamp('cancelling_at', { withTimezone: true }),
    cancelledAt: timestamp('cancelled_at', { withTimezone: true }),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    index('batches_org_id').on(t.orgId, t.id),
    index('batches_lineage_id').on(t.lineageId, t.id),
    // A file's delete and the retention run ask whether a batch still reads it.
    index('batches_input_file_id').on(t.inputFileId),
  ],
);

/** How an item ended: answered (2xx), answered with an error, or never run. */
export const BATCH_ITEM_OUTCOMES = ['succeeded', 'errored', 'canceled', 'expired'] as const;
export type BatchItemOutcome = (typeof BATCH_ITEM_OUTCOMES)[number];

/**
 * One item of a batch, recorded once: the key (batch, line) makes a second record of the same
 * item (a retried activity's) a no-op, so the output holds each item once. `attempts` counts
 * the calls made for it: a call started and lost with its worker is made again.
 */
export const batchItems = pgTable(
  'batch_items',
  {
    batchId: text('batch_id').notNull().references(() => batches.id, { onDelete: 'cascade' }),
    line: integer('line').notNull(),
    customId: text('custom_id').notNull(),
    /** Null while a call for it is under way. */
    outcome: text('outcome', { enum: BATCH_ITEM_OUTCOMES }),
    attempts: integer('attempts').notNull().default(0),
    statusCode: integer('status_code'),
    requestId: text('request_id'),
    body: jsonb('body'),
    costNanos: bigint('cost_nanos', { mode: 'number' }),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ name: 'batch_items_pk', columns: [t.batchId, t.line] })],
);
