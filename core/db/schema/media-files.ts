import { index, integer, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { organizations } from './organizations';

/**
 * Stored outputs of the synchronous media endpoints (issue 14: generated or edited images,
 * speech audio), served by signed links until `expires_at` (core/media/stored-files.ts). A row
 * per file rather than a column on the request log: the log is partitioned, written in batches
 * and outlives the file by weeks; the retention run deletes the object, then this row.
 */
export const mediaFiles = pgTable(
  'media_files',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    /** The request that produced it (`req_...`); the download name is taken from it. */
    requestId: text('request_id').notNull(),
    storageKey: text('storage_key').notNull(),
    mimeType: text('mime_type').notNull(),
    bytes: integer('bytes').notNull(),
    /** The name `download=1` gives the file (`Content-Disposition: attachment`). */
    filename: text('filename').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  // The retention run walks expired files oldest first.
  (t) => [index('media_files_expires_at').on(t.expiresAt)],
);
