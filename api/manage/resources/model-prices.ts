import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { modelPrices } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { afterCursor, keysetOrder, type Keyset } from '../../../core/paging';
import { isProviderKind } from '../../../core/providers/kinds';
import { withErrorCode } from '../../validation';
import { unixTime } from './fields';
import { selectOne, type ResourceType } from './resource-type';
import { unix } from './router';

type PriceRow = typeof modelPrices.$inferSelect;

const dollars = z.number().min(0).max(1_000_000).nullable();

const rates = {
  input_per_million: dollars,
  output_per_million: dollars,
  cached_input_per_million: dollars,
  unit: dollars.describe('Dollars per image, second or character, for models not priced by tokens.'),
  note: z.string().max(200).nullable(),
};

const createSchema = z
  .strictObject({ model: z.string().trim().min(1).max(200), provider: withErrorCode(z.string().min(1).max(64), 'unknown_provider').nullable(), ...rates })
  .partial()
  .required({ model: true });
const patchSchema = z.strictObject(rates).partial();

function rateColumns(input: z.infer<typeof patchSchema>) {
  return {
    ...(input.input_per_million !== undefined && { inputPerMillion: input.input_per_million }),
    ...(input.output_per_million !== undefined && { outputPerMillion: input.output_per_million }),
    ...(input.cached_input_per_million !== undefined && { cachedInputPerMillion: input.cached_input_per_million }),
    ...(input.unit !== undefined && { unit: input.unit }),
    ...(input.note !== undefined && { note: input.note }),
  };
}

/** Custom rates for cost estimates (spec 2.6): one per model and provider (null: any provider). */
export const modelPricesResource: ResourceType<PriceRow> = {
  type: 'model_prices',
  object: 'model_price',
  scope: 'prices',
  table: modelPrices,
  readSchema: z.object({ model: z.string(), provider: z.string().nullable(), ...rates, created_at: unixTime, updated_at: unixTime }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    const query = db.select().from(modelPrices).where(and(eq(modelPrices.orgId, orgId), eq(modelPrices.id, id)));
    return selectOne(query, forUpdate);
  },

  /** Natural order: a price table by model name (which no patch changes), then id. */
  async list(db, principal, page) {
    const keyset: Keyset = { key: modelPrices.model, id: modelPrices.id, order: 'asc', type: 'text' };
    const rows = await db.select().from(modelPrices)
      .where(and(eq(modelPrices.orgId, principal.orgId), afterCursor(keyset, page.after)))
      .orderBy(...keysetOrder(keyset))
      .limit(page.limit + 1);
    return rows.map((row) => ({ row, cursor: { at: row.model, id: row.id } }));
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const provider = input.provider ?? null;
    if (provider !== null && !isProviderKind(provider)) throw new GatewayError('unknown_provider', `Unknown provider \`${provider}\`.`);
    const [row] = await call.db.insert(modelPrices).values({
      id: newId('price'),
      orgId: call.principal.orgId,
      model: input.model,
      provider,
      ...rateColumns(input),
    }).returning();
    return { row: row! };
  },

  async patch(_call, _row, input: z.infer<typeof patchSchema>) {
    return rateColumns(input);
  },

  async remove() {
    return 'delete';
  },

  uniqueConflict: (constraint) =>
    constraint === 'model_prices_org_model_provider'
      ? new GatewayError('invalid_request', 'Invalid `model`: a price for this model and provider exists; patch it instead.')
      : undefined,

  present: (row) => ({
    model: row.model,
    provider: row.provider,
    input_per_million: row.inputPerMillion,
    output_per_million: row.outputPerMillion,
    cached_input_per_million: row.cachedInputPerMillion,
    unit: row.unit,
    note: row.note,
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
};
