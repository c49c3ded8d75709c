import { integer, text, timestamp } from 'drizzle-orm/pg-core';

/** Columns every management resource carries (spec 2.6: id, version, managed_by). */
export const resourceColumns = () => ({
  version: integer('version').notNull().default(1),
  managedBy: text('managed_by').notNull().default('api'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});
