import { sql } from 'drizzle-orm';
import { numeric, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { organizations } from './organizations';

/** A customer-entered rate; it only feeds cost estimates. Dollars per million tokens, or per unit. */
export const modelPrices = pgTable(
  'model_prices',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    model: text('model').notNull(),
    /** A provider kind, or null for any provider serving the model. */
    provider: text('provider'),
    inputPerMillion: numeric('input_per_million', { mode: 'number' }),
    outputPerMillion: numeric('output_per_million', { mode: 'number' }),
    cachedInputPerMillion: numeric('cached_input_per_million', { mode: 'number' }),
    unit: numeric('unit', { mode: 'number' }),
    note: text('note'),
    ...resourceColumns(),
  },
  (t) => [uniqueIndex('model_prices_org_model_provider').on(t.orgId, t.model, sql`coalesce(${t.provider}, '')`)],
);
